import { tinyModel } from "../../tests/helpers/models.ts";
const path = await tinyModel();
console.log(path);
const bin = `${Deno.env.get("HOME")}/.cache/skulk/engines/llama.cpp-80fb11ac73e6-cpu/bin/llama-server`;
const p = new Deno.Command(bin, { args: ["-m", path, "-c", "4096", "--port", "28777", "--host", "127.0.0.1", "-np", "4", "--kv-unified", "-t", "1", "--jinja", "--no-webui"], stdout: "null", stderr: "null" }).spawn();
for (;;) { try { if ((await fetch("http://127.0.0.1:28777/health")).ok) break; } catch {} await new Promise(r => setTimeout(r, 200)); }
const words = Array.from({ length: 700 }, (_, i) => `word${i % 97}`).join(" ");
for (let i = 0; i < 2; i++) {
  const t0 = performance.now();
  const r = await (await fetch("http://127.0.0.1:28777/v1/chat/completions", { method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({ messages: [{ role: "user", content: words }], max_tokens: 4 }) })).json();
  console.log(performance.now() - t0, JSON.stringify(r).slice(0, 600));
}
p.kill("SIGKILL");
