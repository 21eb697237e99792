// The Vercel AI SDK (`ai` + `@ai-sdk/openai`) with its OpenTelemetry telemetry, driving the vLLM emulator.
//
// Run by the Python driver `instrumented_stack/realclients/drivers/vercel_ai.py`, which passes one JSON spec
// on stdin (its fields: see `readSpec`) and reads the truth this script writes to `spec.truth_out`: the same
// per-request shape as `instrumented_stack/realclients/truth.py` (`RequestTruth`, times in ns from the request's
// start on the monotonic clock, `start_unix_ns` on the wall clock).
//
// Each user request is a SERVER span `POST /ask` around one `generateText` (or, with `stream`, `streamText`)
// call with two tools and `stopWhen: stepCountIs(6)`, telemetry on (`experimental_telemetry`). The provider is
// `createOpenAI({ baseURL, fetch })` on the Chat Completions API (`provider.chat`), which vLLM serves. The
// `fetch` given to the provider times each HTTP attempt on the wire (start, headers, first body bytes, body end)
// and reads the `usage` the server returned; no span is read. With `http_spans` the undici instrumentation adds a
// CLIENT span per request and injects `traceparent`; without, the fetch wrapper injects it.

import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

import { createOpenAI } from "@ai-sdk/openai";
import { context, propagation, SpanKind, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { registerInstrumentations } from "@opentelemetry/instrumentation";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const MAX_STEPS = 6; // ends a loop that would not stop (the emulator answers in text after each tool ran once)

async function readSpec() {
  // Fields: llm_base_url, otlp_traces_url, model, stream, requests, http_spans, tool_s, service_name,
  // root_span_name, system_prompt, questions, tools ({name: description}), truth_out.
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf-8"));
}

/** Ground truth of the open request, measured on `process.hrtime` (ns since the request started). */
class TruthRecorder {
  constructor() {
    this.requests = [];
    this.current = null;
    this.startMono = 0n;
  }

  nowNs() {
    return this.current === null ? 0 : Number(process.hrtime.bigint() - this.startMono);
  }

  async request(traceId, work) {
    this.current = { trace_id: traceId, start_unix_ns: Number(BigInt(Date.now()) * 1_000_000n), e2e_ns: 0 };
    this.current.llm_attempts = [];
    this.current.tools = [];
    this.startMono = process.hrtime.bigint();
    try {
      return await work();
    } finally {
      this.current.e2e_ns = this.nowNs();
      this.requests.push(this.current);
      this.current = null;
    }
  }

  attempt(url) {
    if (this.current === null) return null;
    const attempt = {
      url,
      start_ns: this.nowNs(),
      end_ns: null,
      headers_ns: null,
      first_byte_ns: null,
      status: null,
      streamed: false,
      prompt_tokens: null,
      completion_tokens: null,
      cached_tokens: null,
      finish_reason: null,
    };
    this.current.llm_attempts.push(attempt);
    return attempt;
  }

  async tool(name, work) {
    const start = this.nowNs();
    try {
      return await work();
    } finally {
      this.current?.tools.push({ name, start_ns: start, end_ns: this.nowNs() });
    }
  }
}

/** The `usage` and last `finish_reason` of an OpenAI response body (JSON, or SSE chunks); nulls otherwise. */
function readUsage(text, streamed) {
  const payloads = [];
  try {
    if (streamed) {
      for (const line of text.split("\n")) {
        const data = line.startsWith("data: ") ? line.slice(6).trim() : null;
        if (data && data !== "[DONE]") payloads.push(JSON.parse(data));
      }
    } else {
      payloads.push(JSON.parse(text));
    }
  } catch {
    return [null, null];
  }
  const usage = payloads.findLast((p) => p.usage)?.usage ?? null;
  const reasons = payloads.flatMap((p) => (p.choices ?? []).map((c) => c.finish_reason).filter(Boolean));
  return [usage, reasons.at(-1) ?? null];
}

/** A `fetch` that records each attempt into `recorder` (and injects `traceparent` when `inject`). */
function recordingFetch(recorder, inject) {
  return async (input, init = {}) => {
    const headers = new Headers(init.headers);
    if (inject) propagation.inject(context.active(), headers, { set: (h, k, v) => h.set(k, v) });
    const attempt = recorder.attempt(String(input instanceof Request ? input.url : input));
    const response = await fetch(input, { ...init, headers });
    if (attempt === null || response.body === null) return response;
    attempt.headers_ns = recorder.nowNs();
    attempt.status = response.status;
    attempt.streamed = (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
    const parts = [];
    const finish = () => {
      if (attempt.end_ns !== null) return;
      attempt.end_ns = recorder.nowNs();
      const [usage, reason] = readUsage(Buffer.concat(parts).toString("utf-8"), attempt.streamed);
      attempt.finish_reason = reason;
      attempt.prompt_tokens = usage?.prompt_tokens ?? null;
      attempt.completion_tokens = usage?.completion_tokens ?? null;
      attempt.cached_tokens = usage?.prompt_tokens_details?.cached_tokens ?? null;
    };
    const timed = response.body.pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          if (attempt.first_byte_ns === null && chunk.length) attempt.first_byte_ns = recorder.nowNs();
          parts.push(Buffer.from(chunk));
          controller.enqueue(chunk);
        },
        flush: finish,
        cancel: finish,
      }),
    );
    return new Response(timed, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** Tool work as the Python drivers do it (`DriverRun.tool_work`): sleep half of `toolS`, sha256 rounds for the rest. */
async function toolWork(recorder, toolS, name, argument) {
  let digest = Buffer.from(argument);
  await recorder.tool(name, async () => {
    await sleep((toolS / 2) * 1000);
    const deadline = performance.now() + (toolS / 2) * 1000;
    while (performance.now() < deadline) digest = createHash("sha256").update(digest).digest();
  });
  if (name === "lookup_order") {
    return JSON.stringify({ order: argument, status: "shipped", items: ["tent"], ref: digest.toString("hex").slice(0, 8) });
  }
  return JSON.stringify({ destination: argument, days: 3 });
}

async function main() {
  const spec = await readSpec();
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": spec.service_name }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: spec.otlp_traces_url }))],
  });
  provider.register();
  if (spec.http_spans) registerInstrumentations({ instrumentations: [new UndiciInstrumentation()] });
  const tracer = trace.getTracer("instrumented_stack.realclients");
  const recorder = new TruthRecorder();
  const openai = createOpenAI({
    baseURL: spec.llm_base_url,
    apiKey: "unused",
    fetch: recordingFetch(recorder, !spec.http_spans),
  });
  const model = openai.chat(spec.model);
  const tools = {
    lookup_order: tool({
      description: spec.tools.lookup_order,
      inputSchema: z.object({ order_id: z.string() }),
      execute: ({ order_id }) => toolWork(recorder, spec.tool_s, "lookup_order", order_id),
    }),
    shipping_estimate: tool({
      description: spec.tools.shipping_estimate,
      inputSchema: z.object({ city: z.string() }),
      execute: ({ city }) => toolWork(recorder, spec.tool_s, "shipping_estimate", city),
    }),
  };

  async function ask(question) {
    const call = {
      model,
      system: spec.system_prompt,
      prompt: question,
      tools,
      stopWhen: stepCountIs(MAX_STEPS),
      experimental_telemetry: { isEnabled: true, functionId: "support_agent" },
    };
    if (!spec.stream) return (await generateText(call)).text;
    const result = streamText(call);
    for await (const _part of result.fullStream);
    return await result.text;
  }

  const traceIds = [];
  for (let index = 0; index < spec.requests; index++) {
    const attributes = { "http.request.method": "POST", "http.route": "/ask", "app.request.index": index };
    await tracer.startActiveSpan(spec.root_span_name, { kind: SpanKind.SERVER, attributes }, async (span) => {
      const traceId = span.spanContext().traceId;
      traceIds.push(traceId);
      await recorder.request(traceId, () => ask(spec.questions[index % spec.questions.length]));
      span.setAttribute("http.response.status_code", 200);
      span.end();
    });
  }
  await provider.forceFlush();
  await provider.shutdown();
  writeFileSync(spec.truth_out, JSON.stringify({ requests: recorder.requests }, null, 2) + "\n");
  process.stdout.write(JSON.stringify({ trace_ids: traceIds }) + "\n");
}

await main();
