/**
 * The chaos suite's event writer, run inside one node's network namespace so it reaches its node even
 * while that node's link is cut: submits one TestEvent at a time and prints `ack <ms> <eventId>` per 2xx.
 */
const [port, seconds, everyMs] = Deno.args.map(Number);
if (!port || !seconds || !everyMs) {
  console.error("usage: writer.ts <port> <seconds> <every-ms>");
  Deno.exit(2);
}
const end = Date.now() + seconds * 1000;
while (Date.now() < end) {
  const started = Date.now();
  try {
    // A write the node has not answered in 10 s (the chats' hang deadline) is not acknowledged.
    const res = await fetch(`http://127.0.0.1:${port}/cluster/test_events?count=1`, {
      method: "POST",
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    if (res.ok) {
      for (const id of (JSON.parse(text) as { submitted: string[] }).submitted) {
        console.log(`ack ${Date.now()} ${id}`);
      }
    }
  } catch { /* refused, timed out or cut: not acknowledged */ }
  await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (Date.now() - started))));
}
