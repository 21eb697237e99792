"""Span attribute names the stack's services write, in one place.

GenAI semantic conventions (open-telemetry/semantic-conventions-genai, ``gen-ai-spans.md``,
``gen-ai-agent-spans.md``, ``registry/attributes/gen-ai.md``): ``gen_ai.*``. General semconv:
``server.*``, ``error.type``. The rest are the stack's own names (``agent.*``, ``gateway.*``,
``retrieval.*``, ``tool.*``, ``llm.*``), chosen so an analyser can tell stages apart from spans alone.
vLLM's own ``llm_request`` attributes live in ``engine.vllm_span``.
"""

from __future__ import annotations

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_DATA_SOURCE_ID = "gen_ai.data_source.id"
GEN_AI_RETRIEVAL_TOP_K = "gen_ai.retrieval.top_k"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT = "gen_ai.embeddings.dimension.count"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

AGENT_INTENT = "agent.intent"
AGENT_PLAN_STEPS = "agent.plan.steps"
AGENT_MAX_STEPS = "agent.plan.max_steps"
GATEWAY_TIER = "gateway.priority_tier"
GATEWAY_QUEUE_WAIT_S = "gateway.queue_wait_s"
GATEWAY_ESTIMATED_WAIT_S = "gateway.estimated_wait_s"
GATEWAY_SLA_S = "gateway.sla_s"
GATEWAY_QUEUE_DEPTH = "gateway.queue_depth"
RETRIEVAL_TOP_K = "retrieval.top_k"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
RETRIEVAL_INDEX_SIZE = "retrieval.index_size"
TOOL_SCHEMAS_CHECKED = "tool.schemas_checked"
TOOL_VALID = "tool.args_valid"
LLM_PROMPT_SHA256 = "llm.prompt.sha256"
LLM_PROMPT_TOKENS = "llm.prompt_tokens"
LLM_TOKENIZER_WORKER = "llm.tokenizer.worker"
LLM_OUTPUT_CHARS = "llm.output.chars"
