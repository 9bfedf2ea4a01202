/**
 * One node's diagnostics and capture bundle, gathered at the edge: the replicated state, the worker's
 * runners, /proc, the flight recorder, the log file and the shipper's counters.
 */
import { instanceBody } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";
import { untag } from "../cluster/tagged.ts";
import { extensionsStatus } from "../extensions/plane.ts";
import { logFile, shippingStats } from "../log/mod.ts";
import type { NodeContext } from "../node/context.ts";
import { VERSION } from "../version.ts";
import type { LocalRunner } from "../worker/runner.ts";
import { type FlightEntry, windowed } from "./recorder.ts";
import { hasProc, type ProcSample, sampleTree } from "./procs.ts";
import type {
  Capture,
  CaptureRequest,
  NodeDiagnostics,
  ProcessInfo,
  RunnerSynopsis,
  SupervisorRunner,
} from "./shapes.ts";

/** Entries of one runner a bundle carries (upstream keeps 128 per runner). */
const RUNNER_ENTRIES = 128;
/** Bytes read from the end of the log file for its tail. */
const LOG_TAIL_BYTES = 1024 * 1024;

export class UnknownRunner extends Error {
  constructor(runnerId: string) {
    super(`no runner ${runnerId} on this node`);
    this.name = "UnknownRunner";
  }
}

const statusKind = (state: ClusterState, runnerId: string): string | null => {
  const s = state.runners[runnerId];
  return s ? Object.keys(s)[0] ?? null : null;
};

/** Every runner of the state's instances, sorted by (model, rank) as upstream's timeline lists them. */
export function runnerSynopses(state: ClusterState): RunnerSynopsis[] {
  const out: RunnerSynopsis[] = [];
  for (const inst of Object.values(state.instances)) {
    const body = instanceBody(inst);
    const nodeOf = new Map(Object.entries(body.shardAssignments.nodeToRunner).map(([n, r]) => [r, n]));
    for (const [runnerId, shard] of Object.entries(body.shardAssignments.runnerToShard)) {
      const m = untag(shard);
      out.push({
        runnerId,
        instanceId: body.instanceId,
        nodeId: nodeOf.get(runnerId) ?? "",
        modelId: body.shardAssignments.modelId,
        deviceRank: m.deviceRank,
        worldSize: m.worldSize,
        statusKind: statusKind(state, runnerId),
      });
    }
  }
  return out.sort((a, b) =>
    a.modelId < b.modelId ? -1 : a.modelId > b.modelId ? 1 : (a.deviceRank ?? 0) - (b.deviceRank ?? 0)
  );
}

function supervisorRunner(ctx: NodeContext, r: LocalRunner, now: number): SupervisorRunner {
  const state = ctx.log.state;
  const inst = state.instances[r.instanceId];
  const shard = inst && instanceBody(inst).shardAssignments.runnerToShard[r.runnerId];
  const m = shard ? untag(shard) : null;
  const mine = (ctx.flight?.entries() ?? []).filter((e) => e.runnerId === r.runnerId);
  const lastPhase = mine.filter((e) => e.source === "runner").at(-1);
  const pid = r.engine?.pid ?? null;
  return {
    runnerId: r.runnerId,
    instanceId: r.instanceId,
    nodeId: ctx.nodeId,
    modelId: r.modelId,
    deviceRank: m?.deviceRank ?? null,
    worldSize: m?.worldSize ?? null,
    startLayer: m?.startLayer ?? null,
    endLayer: m?.endLayer ?? null,
    nLayers: m?.nLayers ?? null,
    role: r.role,
    engineKind: r.engineKind ?? r.engine?.spec.kind ?? null,
    pid,
    processAlive: pid !== null && alive(pid),
    statusKind: statusKind(state, r.runnerId),
    phase: r.phase,
    phaseStartedAt: lastPhase?.at ?? null,
    secondsInPhase: lastPhase ? Math.round((now - Date.parse(lastPhase.at)) / 100) / 10 : null,
    failure: r.failure,
    logTail: r.engine?.tail().slice(-50) ?? [],
    flightRecorder: mine.slice(-RUNNER_ENTRIES),
  };
}

/** Whether the pid runs (and is no zombie); without /proc the engine's own record is all there is. */
function alive(pid: number): boolean {
  if (!hasProc()) return true;
  try {
    return !/\) Z /.test(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return false;
  }
}

async function processes(
  ctx: NodeContext,
  windowMs: number,
): Promise<{ list: ProcessInfo[]; raw: ProcSample[] }> {
  const total = Deno.systemMemoryInfo().total;
  const runnerOf = new Map(
    (ctx.worker?.runners() ?? []).flatMap((
      r,
    ) => (r.engine?.pid ? [[r.engine.pid, r.runnerId] as const] : [])),
  );
  if (!hasProc()) {
    // No /proc (macOS): the daemon alone, from what Deno itself reports.
    const rss = Deno.memoryUsage().rss;
    return {
      raw: [],
      list: [{
        pid: Deno.pid,
        parentPid: Deno.ppid,
        role: "skulk",
        command: ["skulk", ...Deno.args].join(" "),
        status: null,
        cpuPercent: null,
        memoryPercent: Math.round(rss / total * 1000) / 10,
        rss,
        elapsedSeconds: (Date.now() - ctx.startedAt) / 1000,
        isChildOfSkulk: false,
        runnerId: null,
      }],
    };
  }
  const raw = await sampleTree(Deno.pid, windowMs);
  const list = raw.map((p): ProcessInfo => ({
    pid: p.pid,
    parentPid: p.ppid,
    role: p.pid === Deno.pid ? "skulk" : runnerOf.has(p.pid) ? "runner" : "other",
    command: p.command,
    status: p.state,
    cpuPercent: p.cpuPercent,
    memoryPercent: Math.round(p.rssBytes / total * 1000) / 10,
    rss: p.rssBytes,
    elapsedSeconds: p.elapsedSeconds,
    isChildOfSkulk: p.pid !== Deno.pid,
    runnerId: runnerOf.get(p.pid) ?? null,
  }));
  return { list, raw };
}

function configExists(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** The node's diagnostics; `windowMs` is how long CPU is sampled. */
export async function nodeDiagnostics(ctx: NodeContext, windowMs = 200): Promise<NodeDiagnostics> {
  const [diag] = await nodeDiagnosticsWithSamples(ctx, windowMs);
  return diag;
}

async function nodeDiagnosticsWithSamples(
  ctx: NodeContext,
  windowMs: number,
): Promise<[NodeDiagnostics, ProcSample[]]> {
  const now = Date.now();
  const state = ctx.log.state;
  const master = ctx.masterNodeId();
  const own = ctx.telemetry.get(ctx.nodeId)?.reading;
  const mem = Deno.systemMemoryInfo();
  const shipping = shippingStats();
  const file = logFile();
  const { list, raw } = await processes(ctx, windowMs);
  const runners = (ctx.worker?.runners() ?? []).map((r) => supervisorRunner(ctx, r, now));
  const warnings: string[] = [];
  if (!master) {
    warnings.push("this node knows no master backed by a majority: changes are refused until one is elected");
  }
  for (const h of ctx.cluster?.health() ?? []) warnings.push(`${h.code}: ${h.message}`);
  for (const r of runners) {
    if (r.phase === "failed") {
      warnings.push(`runner ${r.runnerId} (${r.modelId}) failed: ${(r.failure ?? "").split("\n")[0]}`);
    } else if (r.pid !== null && !r.processAlive) {
      warnings.push(`runner ${r.runnerId}: its engine (pid ${r.pid}) is gone`);
    }
  }
  if (shipping && shipping.dropped > 0) {
    warnings.push(
      `log shipping dropped ${shipping.dropped} line(s) (${shipping.lastError ?? "buffer full"})`,
    );
  }
  for (const r of extensionsStatus(ctx).refused) {
    warnings.push(`extension ${r.name ?? r.source} refused: ${r.reason}`);
  }
  if (shipping && shipping.failuresInARow > 0) {
    warnings.push(`log shipping is failing: ${shipping.lastError}`);
  }

  const placements = Object.values(state.instances).map((inst) => {
    const body = instanceBody(inst);
    const nodes = Object.keys(body.shardAssignments.nodeToRunner);
    const pw: string[] = [];
    const prs = Object.entries(body.shardAssignments.nodeToRunner).map(([nodeId, runnerId]) => {
      const shard = body.shardAssignments.runnerToShard[runnerId];
      const kind = statusKind(state, runnerId);
      if (kind === "RunnerFailed") pw.push(`runner ${runnerId} on ${nodeId} failed`);
      if (kind === null) pw.push(`runner ${runnerId} on ${nodeId} has reported no status`);
      return { runnerId, nodeId, deviceRank: shard ? untag(shard).deviceRank : null, statusKind: kind };
    });
    return {
      instanceId: body.instanceId,
      modelId: body.shardAssignments.modelId,
      masterNodeId: master,
      masterIsPlacementNode: master !== null && nodes.includes(master),
      localNodeIsPlacementNode: nodes.includes(ctx.nodeId),
      placementNodeIds: nodes,
      runners: prs,
      warnings: pw,
    };
  });

  const diag: NodeDiagnostics = {
    generatedAt: new Date(now).toISOString(),
    runtime: {
      nodeId: ctx.nodeId,
      hostname: Deno.hostname(),
      friendlyName: ctx.config.friendlyName,
      isMaster: master === ctx.nodeId,
      masterNodeId: master,
      clusterRole: ctx.cluster?.view().role ?? "none",
      cwd: Deno.cwd(),
      configPath: ctx.configPath,
      configFileExists: configExists(ctx.configPath),
      skulkVersion: VERSION,
      skulkCommit: own?.identity.skulkCommit || null,
      libp2pNamespace: ctx.config.namespace,
      denoVersion: Deno.version.deno,
      pid: Deno.pid,
      startedAt: new Date(ctx.startedAt).toISOString(),
      uptimeSeconds: Math.round((now - ctx.startedAt) / 100) / 10,
      tracingEnabled: state.tracingEnabled,
      structuredLoggingConfigured: shipping !== null,
      loggingIngestUrl: shipping?.url ?? null,
    },
    identity: {
      nodeId: ctx.nodeId,
      friendlyName: ctx.config.friendlyName,
      namespace: ctx.config.namespace,
      apiAddress: own?.apiAddress ?? null,
      dataDir: ctx.config.dataDir,
    },
    resources: {
      gatheredMemory: own?.memory ?? null,
      currentMemory: {
        total: mem.total,
        available: mem.available,
        free: mem.free,
        swapTotal: mem.swapTotal,
        swapFree: mem.swapFree,
      },
      currentWired: null,
      disk: own?.disk ?? null,
      system: own?.system ?? null,
      network: own?.network ?? null,
    },
    processes: list,
    supervisorRunners: runners,
    placements,
    logging: { file, shipping },
    flightRecorder: {
      size: ctx.flight?.size ?? 0,
      held: ctx.flight?.entries().length ?? 0,
      noted: ctx.flight?.noted ?? 0,
    },
    extensions: extensionsStatus(ctx),
    warnings,
  };
  return [diag, raw];
}

/** The newest `n` lines of the log file (the current one, then the newest rotation if it is short). */
export async function logTail(n: number): Promise<string[]> {
  const file = logFile();
  if (!file || n === 0) return [];
  const lines: string[] = [];
  for (const path of [file.path, `${file.path}.1`]) {
    let text: string;
    try {
      using f = await Deno.open(path, { read: true });
      const size = (await f.stat()).size;
      const start = Math.max(0, size - LOG_TAIL_BYTES);
      await f.seek(start, Deno.SeekMode.Start);
      const buf = new Uint8Array(size - start);
      let at = 0;
      while (at < buf.length) {
        const got = await f.read(buf.subarray(at));
        if (got === null) break;
        at += got;
      }
      text = new TextDecoder().decode(buf.subarray(0, at));
      // A window that starts mid-file starts mid-line: that first piece is dropped.
      if (start > 0) text = text.slice(text.indexOf("\n") + 1);
    } catch {
      continue;
    }
    lines.unshift(...text.split("\n").filter(Boolean));
    if (lines.length >= n) break;
  }
  return lines.slice(-n);
}

/** The capture bundle: diagnostics with CPU sampled over the asked duration, the recorder, the log tail. */
export async function capture(ctx: NodeContext, req: CaptureRequest): Promise<Capture> {
  if (req.runnerId && !ctx.worker?.runner(req.runnerId)) throw new UnknownRunner(req.runnerId);
  const windowMs = req.includeProcessSamples ? req.sampleDurationSeconds * 1000 : 100;
  const [diag, raw] = await nodeDiagnosticsWithSamples(ctx, windowMs);
  let entries: FlightEntry[] = ctx.flight?.entries() ?? [];
  if (req.runnerId) entries = entries.filter((e) => e.runnerId === req.runnerId);
  if (req.taskId) entries = entries.filter((e) => e.taskId === req.taskId);
  const runner = req.runnerId
    ? diag.supervisorRunners.find((r) => r.runnerId === req.runnerId) ?? null
    : null;
  const roles = new Map(diag.processes.map((p) => [p.pid, p.role]));
  return {
    generatedAt: new Date().toISOString(),
    nodeId: ctx.nodeId,
    nodeDiagnostics: diag,
    runner,
    flightRecorder: windowed(entries, {}),
    processSamples: req.includeProcessSamples
      ? raw.map((p) => ({
        name: p.command.split(" ")[0]?.split("/").pop() || String(p.pid),
        pid: p.pid,
        role: roles.get(p.pid) ?? "other",
        durationSeconds: req.sampleDurationSeconds,
        ok: true,
        cpuPercent: p.cpuPercent,
        rssStart: p.rssStartBytes,
        rssEnd: p.rssBytes,
        error: null,
      }))
      : [],
    logTail: await logTail(req.logLines),
    warnings: [
      ...diag.warnings,
      ...(hasProc() ? [] : ["no /proc on this OS: processes are the daemon alone, without CPU samples"]),
    ],
  };
}
