"""Real vLLM as the stack's engine: engine choice, a tiny Llama-style model directory, the ``vllm serve`` command.

**Engine choice** (:func:`resolve_engine`): ``emulator`` (the vLLM emulator of this package), ``vllm``
(``vllm serve`` on a GPU) or ``auto`` (``vllm`` when the ``vllm`` package is importable *and* a CUDA GPU is
visible, else the emulator). Asking for ``vllm`` where either is missing raises
:class:`VllmUnavailableError` naming what is missing. vLLM is the optional extra ``hotspan[vllm]``; nothing
else in the project imports it, and ``make test`` never needs it.

**Model** (:func:`write_tiny_model`): a Llama-architecture ``config.json`` of about 2 million parameters
(4 MB in bfloat16: hidden size 256, 2 layers, 4 heads, 2 KV heads, head size 64), served with
``--load-format dummy`` (random weights: no weights file exists), and the tokenizer files built locally
from the stack's own BPE tokenizer (``tokenizer.py``) plus ``<s>``/``</s>`` special tokens appended after its
vocabulary, so the ids of ordinary text are unchanged. Its chat template joins the message contents with
single spaces, exactly as the emulator builds a chat prompt, so a chat request has the same prompt token
count on both engines. Nothing is fetched (``HF_HUB_OFFLINE=1``).

**Command line** (:func:`serve_args`): the stack's engine settings map onto ``vllm serve`` flags:

| emulator setting / fault | ``vllm serve`` flag |
| --- | --- |
| ``served_model_name`` | ``--served-model-name`` |
| ``max_model_len`` | ``--max-model-len`` (and the model's ``max_position_embeddings``) |
| ``scheduler.max_num_seqs`` (``queue_saturation``: 2; ``decode_bound``: 256) | ``--max-num-seqs`` |
| ``scheduler.max_num_batched_tokens`` | ``--max-num-batched-tokens`` |
| ``scheduler.block_size`` | ``--block-size`` |
| ``scheduler.num_gpu_blocks`` | ``--num-gpu-blocks-override`` |
| ``scheduler.enable_prefix_caching`` (``prefix_cache_off``) | ``--[no-]enable-prefix-caching`` |
| ``scheduler.enable_chunked_prefill`` | ``--[no-]enable-chunked-prefill`` |
| ``engine_tls`` (``connection_per_request``) | ``--ssl-certfile`` / ``--ssl-keyfile`` |
| ``service_name`` | ``OTEL_SERVICE_NAME`` (vLLM's tracer provider reads it) |
| the configuration (``config_resource``) | ``OTEL_RESOURCE_ATTRIBUTES`` (``vllm.config.*``; the same provider) |

No vLLM equivalent: the emulator's ``time_model`` (step costs and the ``speed`` factor: real vLLM takes the
GPU's time, so the sizes in the fault table of ``instrumented_stack/README.md`` do not carry over) and
``engine_index`` (vLLM sets its ``engine`` metric label from the data-parallel rank). Every fault switch
still applies: the four engine faults through the flags above, the other five change only the agent,
retriever and LLM client, which do not depend on the engine. With the tiny random model, generated text is
noise; the agent asks with ``ignore_eos`` so output lengths still follow the workload.

**Traces**: ``--otlp-traces-endpoint`` points at the stack's OTLP endpoint; for ``http/protobuf`` the value
is the full ``.../v1/traces`` URL (vLLM hands it to the OTLP/HTTP exporter as is) and
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` says which exporter to use (vLLM's default is ``grpc``). vLLM reads
``traceparent``/``tracestate`` from each request's headers, so its ``llm_request`` span becomes a child of
the LLM client's ``chat`` span, as the emulator's does.

Sources: ``vllm serve --help`` (engine arguments) and ``vllm/tracing/otel.py`` (``init_tracer``,
``get_span_exporter``) of vllm-project/vllm; the ``llm_request`` attribute set is ``vllm_span``'s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from tokenizers import AddedToken
from tokenizers import Tokenizer as HfTokenizer

from instrumented_stack.engine.app import EngineConfig
from instrumented_stack.engine.config_resource import engine_config_attributes, resource_attributes_env
from instrumented_stack.engine.process import EngineLaunch, EngineProcess, free_loopback_port
from instrumented_stack.engine_probe import VLLM_EXTRA, VllmAvailability, cuda_gpus, probe_vllm
from instrumented_stack.telemetry import OtlpProtocol, otlp_traces_url
from instrumented_stack.tls import CertificateFiles
from instrumented_stack.tokenizer import UNK_TOKEN, tokenizer_file

EngineChoice = Literal["auto", "emulator", "vllm"]
"""What a user asks for (``--engine``, ``HOTSPAN_STACK_ENGINE``)."""

EngineBackend = Literal["emulator", "vllm"]
"""What runs, once ``auto`` is resolved."""

ENGINE_CHOICES: tuple[str, ...] = ("auto", "emulator", "vllm")

__all__ = [  # the probe lives in engine_probe (standard library only); it is part of this module's interface
    "ENGINE_CHOICES",
    "VLLM_EXTRA",
    "EngineBackend",
    "EngineChoice",
    "VllmAvailability",
    "VllmSettings",
    "VllmUnavailableError",
    "cuda_gpus",
    "probe_vllm",
    "resolve_engine",
    "serve_args",
    "vllm_engine_process",
    "vllm_launch",
    "vllm_otel",
    "write_tiny_model",
]

BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"

CHAT_TEMPLATE = "{% for message in messages %}{% if not loop.first %} {% endif %}{{ message['content'] }}{% endfor %}"
"""Jinja chat template: message contents joined by single spaces, no role markers (as the emulator joins them)."""

MODEL_FILES: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
"""Files :func:`write_tiny_model` writes; there is no weights file (``--load-format dummy``)."""


class VllmUnavailableError(ValueError):
    """``vllm`` was asked for where the ``vllm`` package or a CUDA GPU is missing; the message names which."""


def resolve_engine(choice: str, probe: Callable[[], VllmAvailability] = probe_vllm) -> EngineBackend:
    """The engine to run for ``choice`` (one of :data:`ENGINE_CHOICES`).

    ``emulator`` needs nothing; ``auto`` is ``vllm`` when ``probe()`` finds vLLM usable, else ``emulator``;
    ``vllm`` insists.

    Raises:
        ValueError: ``choice`` is not a known choice.
        VllmUnavailableError: ``choice`` is ``vllm`` and vLLM or a GPU is missing (both named when both are).
    """
    if choice not in ENGINE_CHOICES:
        raise ValueError(f"unknown engine {choice!r}; expected one of {', '.join(ENGINE_CHOICES)}")
    if choice == "emulator":
        return "emulator"
    availability = probe()
    if availability.usable:
        return "vllm"
    if choice == "auto":
        return "emulator"
    raise VllmUnavailableError(f"engine 'vllm' cannot run here: {'; '.join(availability.missing)}")


class TinyLlamaConfig(BaseModel):
    """Shape of the tiny Llama-style model (random weights). Sizes in elements; head size = hidden / heads."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hidden_size: int = Field(default=256, ge=16)
    intermediate_size: int = Field(default=512, ge=16)
    num_hidden_layers: int = Field(default=2, ge=1)
    num_attention_heads: int = Field(default=4, ge=1)
    num_key_value_heads: int = Field(default=2, ge=1)
    dtype: str = Field(default="bfloat16", description="weights dtype written as config.json torch_dtype")

    @property
    def head_dim(self) -> int:
        """Elements per attention head (64 by default: a size every vLLM attention backend supports)."""
        return self.hidden_size // self.num_attention_heads


class VllmSettings(BaseModel):
    """How the stack runs real vLLM; the engine's scheduler settings come from ``EngineConfig``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_dir: Path | None = Field(
        default=None, description="a model directory to serve; None: write the tiny model (write_tiny_model)"
    )
    model: TinyLlamaConfig = Field(default_factory=TinyLlamaConfig)
    gpu_memory_utilization: float = Field(default=0.3, gt=0, le=1, description="--gpu-memory-utilization")
    enforce_eager: bool = Field(default=True, description="--enforce-eager: no CUDA graphs, faster start")
    dtype: str = Field(default="auto", description="--dtype")
    seed: int = Field(default=0, description="--seed")
    collect_detailed_traces: Literal["model", "worker", "all"] | None = Field(
        default=None, description="--collect-detailed-traces (None: not passed)"
    )
    extra_args: tuple[str, ...] = Field(default=(), description="appended to the vllm serve command line")
    start_timeout_s: float = Field(default=600.0, gt=0, description="longest wait for /health, seconds")
    stop_timeout_s: float = Field(default=60.0, gt=0, description="graceful stop before SIGKILL, seconds")


def write_tiny_model(
    directory: Path,
    *,
    max_model_len: int,
    model: TinyLlamaConfig | None = None,
    tokenizer_path: Path | None = None,
) -> Path:
    """Write the tiny Llama-style model directory (:data:`MODEL_FILES`) into ``directory``; return it.

    Args:
        directory: created if missing; existing files of the same names are replaced.
        max_model_len: the model's ``max_position_embeddings`` and the tokenizer's ``model_max_length``.
        model: the shape; default :class:`TinyLlamaConfig`.
        tokenizer_path: the stack's ``tokenizer.json``; default ``tokenizer.tokenizer_file()``.

    The vocabulary size is the tokenizer's (with ``<s>`` and ``</s>``), so every id the random model can
    sample decodes. Raises ``OSError`` when the directory cannot be written.
    """
    spec = model or TinyLlamaConfig()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = HfTokenizer.from_file(str(tokenizer_path or tokenizer_file()))
    tokenizer.add_special_tokens([AddedToken(BOS_TOKEN, special=True), AddedToken(EOS_TOKEN, special=True)])
    bos_id, eos_id = tokenizer.token_to_id(BOS_TOKEN), tokenizer.token_to_id(EOS_TOKEN)
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": max_model_len,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "vocab_size": tokenizer.get_vocab_size(with_added_tokens=True),
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": spec.dtype,
        "dtype": spec.dtype,
        "use_cache": True,
    }
    special_tokens = {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "unk_token": UNK_TOKEN, "pad_token": EOS_TOKEN}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special_tokens,
        "model_max_length": max_model_len,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    files = {
        "config.json": config,
        "generation_config.json": {"bos_token_id": bos_id, "eos_token_id": eos_id, "_from_model_config": True},
        "tokenizer_config.json": tokenizer_config,
        "special_tokens_map.json": special_tokens,
    }
    for name, content in files.items():
        (directory / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    return directory


def serve_args(
    engine: EngineConfig,
    *,
    model_dir: Path,
    port: int,
    otlp_traces_endpoint: str | None,
    settings: VllmSettings | None = None,
    tls: CertificateFiles | None = None,
) -> list[str]:
    """The arguments after ``vllm serve`` for ``engine`` (see the module docstring's table).

    Args:
        engine: the stack's engine settings (faults already applied).
        model_dir: the model (and tokenizer) directory.
        port: the loopback port to listen on.
        otlp_traces_endpoint: ``--otlp-traces-endpoint`` as vLLM takes it (:func:`vllm_otel`); ``None``:
            no tracing.
        settings: hardware and launch settings; default :class:`VllmSettings`.
        tls: serve HTTPS with this certificate and key.
    """
    vllm = settings or VllmSettings()
    scheduler = engine.scheduler
    args = [
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        engine.served_model_name,
        "--tokenizer",
        str(model_dir),
        "--load-format",
        "dummy",
        "--max-model-len",
        str(engine.max_model_len),
        "--max-num-seqs",
        str(scheduler.max_num_seqs),
        "--max-num-batched-tokens",
        str(scheduler.max_num_batched_tokens),
        "--block-size",
        str(scheduler.block_size),
        "--num-gpu-blocks-override",
        str(scheduler.num_gpu_blocks),
        "--enable-prefix-caching" if scheduler.enable_prefix_caching else "--no-enable-prefix-caching",
        "--enable-chunked-prefill" if scheduler.enable_chunked_prefill else "--no-enable-chunked-prefill",
        "--gpu-memory-utilization",
        str(vllm.gpu_memory_utilization),
        "--dtype",
        vllm.dtype,
        "--seed",
        str(vllm.seed),
    ]
    if vllm.enforce_eager:
        args.append("--enforce-eager")
    if otlp_traces_endpoint is not None:
        args += ["--otlp-traces-endpoint", otlp_traces_endpoint]
        if vllm.collect_detailed_traces is not None:
            args += ["--collect-detailed-traces", vllm.collect_detailed_traces]
    if tls is not None:
        args += ["--ssl-certfile", str(tls.certfile), "--ssl-keyfile", str(tls.keyfile)]
    return args + list(vllm.extra_args)


def vllm_otel(service_name: str, otlp_endpoint: str, protocol: OtlpProtocol) -> tuple[str, dict[str, str]]:
    """``--otlp-traces-endpoint`` and the OTel environment for a vLLM exporting to ``otlp_endpoint``.

    Args:
        service_name: ``service.name`` of vLLM's spans (``OTEL_SERVICE_NAME``).
        otlp_endpoint: the collector's base URL, as the stack's services are given it
            (``http://127.0.0.1:4318`` for ``http/protobuf``, ``http://127.0.0.1:4317`` for ``grpc``).
        protocol: the OTLP transport.

    Returns:
        The flag value (the full ``/v1/traces`` URL for ``http/protobuf``, the address for ``grpc``) and the
        variables: protocol, service name, a 0.5 s batch delay (``OTEL_BSP_SCHEDULE_DELAY``, ms) so spans
        reach the collector soon after each request, plaintext gRPC.
    """
    endpoint = otlp_traces_url(otlp_endpoint) if protocol == "http/protobuf" else otlp_endpoint
    env = {
        "OTEL_SERVICE_NAME": service_name,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "500",
    }
    return endpoint, env


OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
"""Nothing is fetched and nothing is reported home."""


def vllm_launch(
    engine: EngineConfig,
    *,
    model_dir: Path,
    otlp_endpoint: str | None,
    protocol: OtlpProtocol = "http/protobuf",
    settings: VllmSettings | None = None,
    tls: CertificateFiles | None = None,
    port: int | None = None,
) -> EngineLaunch:
    """The :class:`EngineLaunch` of ``python -m vllm.entrypoints.cli.main serve ...`` (= ``vllm serve``).

    The module form runs in this interpreter, so it finds a vLLM installed in this environment even where
    the ``vllm`` console script is not on ``PATH``. ``port`` ``None`` picks a free loopback port.
    """
    chosen_port = port if port is not None else free_loopback_port()
    env = dict(OFFLINE_ENV)
    traces_endpoint = None
    if otlp_endpoint is not None:
        traces_endpoint, otel_env = vllm_otel(engine.service_name, otlp_endpoint, protocol)
        env |= otel_env
        configuration = engine_config_attributes(engine.served_model_name, engine.scheduler)
        env["OTEL_RESOURCE_ATTRIBUTES"] = resource_attributes_env(configuration)
    args = serve_args(
        engine, model_dir=model_dir, port=chosen_port, otlp_traces_endpoint=traces_endpoint, settings=settings, tls=tls
    )
    scheme = "https" if tls else "http"
    return EngineLaunch(
        name="vllm",
        command=(sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", *args),
        url=f"{scheme}://127.0.0.1:{chosen_port}",
        env=env,
        verify=str(tls.certfile) if tls else True,
    )


def vllm_engine_process(
    engine: EngineConfig,
    work_dir: Path,
    *,
    otlp_endpoint: str | None,
    protocol: OtlpProtocol = "http/protobuf",
    settings: VllmSettings | None = None,
    tls: CertificateFiles | None = None,
    log_path: Path | None = None,
) -> EngineProcess:
    """An unstarted :class:`EngineProcess` running vLLM for ``engine``.

    Writes the tiny model to ``work_dir/model`` unless ``settings.model_dir`` names one; the server log goes
    to ``log_path`` (default ``work_dir/vllm.log``). Start it with ``with`` (blocks until ``/health`` answers, up to
    ``settings.start_timeout_s``).
    """
    vllm = settings or VllmSettings()
    model_dir = vllm.model_dir or write_tiny_model(
        work_dir / "model", max_model_len=engine.max_model_len, model=vllm.model
    )
    launch = vllm_launch(
        engine, model_dir=model_dir, otlp_endpoint=otlp_endpoint, protocol=protocol, settings=vllm, tls=tls
    )
    return EngineProcess(
        launch,
        log_path or work_dir / "vllm.log",
        start_timeout_s=vllm.start_timeout_s,
        stop_timeout_s=vllm.stop_timeout_s,
    )
