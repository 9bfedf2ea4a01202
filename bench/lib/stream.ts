/**
 * Shared by the benchmarks: one streamed chat request timed from the client's side (time to the first
 * content token, decode tokens per second between the first and the last), and the median.
 */
export interface StreamTiming {
  ttftMs: number;
  tps: number;
}

export async function timeChatStream(url: string, body: Record<string, unknown>): Promise<StreamTiming> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let first = 0;
  let last = 0;
  let tokens = 0;
  let buf = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.startsWith("data: {")) continue;
      const c = JSON.parse(line.slice(6));
      if (!c.choices?.[0]?.delta?.content) continue;
      const now = performance.now();
      if (!first) first = now;
      last = now;
      tokens++;
    }
  }
  return { ttftMs: first - t0, tps: tokens > 1 ? (tokens - 1) / ((last - first) / 1000) : 0 };
}

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
