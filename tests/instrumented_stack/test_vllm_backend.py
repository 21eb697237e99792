"""Real vLLM as the engine, without a GPU: engine choice, the ``vllm serve`` command line per fault, the tiny
model directory, the launcher against real processes, attribute parity with vLLM v1 (the device check's
run against the emulator: ``tests/tools/test_device_check.py``)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import jinja2
import pytest
from fastapi import FastAPI, Request, Response
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from tokenizers import Tokenizer as HfTokenizer

from hotspan.cli import main as hotspan_main
from instrumented_stack.capture import InMemorySpans
from instrumented_stack.engine import EngineConfig, SchedulerConfig, StepTimeModel, create_engine_app
from instrumented_stack.engine.process import EngineLaunch, EngineProcess, EngineStartError, free_loopback_port
from instrumented_stack.engine.vllm_backend import (
    BOS_TOKEN,
    EOS_TOKEN,
    MODEL_FILES,
    VllmAvailability,
    VllmSettings,
    VllmUnavailableError,
    cuda_gpus,
    probe_vllm,
    resolve_engine,
    serve_args,
    vllm_engine_process,
    vllm_launch,
    write_tiny_model,
)
from instrumented_stack.engine.vllm_span import (
    LLM_REQUEST_ATTRIBUTES,
    LLM_REQUEST_OPTIONAL_ATTRIBUTES,
    VllmSpanAttributes,
)
from instrumented_stack.env import ENV_STACK_ENGINE
from instrumented_stack.faults import FAULTS, apply_faults
from instrumented_stack.llm_client import LlmClient, LlmClientConfig
from instrumented_stack.service_main import emulator_launch
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.supervisor import ProcessStack
from instrumented_stack.tls import CertificateFiles
from instrumented_stack.tokenizer import default_tokenizer, tokenizer_file

Serve = Callable[[FastAPI], str]
USABLE = VllmAvailability(vllm_version="0.33.0", gpus=("GPU 0: NVIDIA H200",))
NO_VLLM_NO_GPU = VllmAvailability(vllm_version=None, gpus=())
NO_GPU = VllmAvailability(vllm_version="0.33.0", gpus=())
MODEL = "test-model"


def _flag(args: list[str], name: str) -> str:
    """The value after flag ``name`` (which must appear exactly once)."""
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]


# Engine choice -------------------------------------------------------------------------------------------


def test_auto_picks_the_emulator_here() -> None:
    if probe_vllm().usable:
        pytest.skip("this machine has vLLM and a GPU: auto picks vllm here")
    assert resolve_engine("auto") == "emulator"


def test_auto_picks_vllm_only_when_both_are_there() -> None:
    assert resolve_engine("auto", lambda: USABLE) == "vllm"
    assert resolve_engine("auto", lambda: NO_GPU) == "emulator"
    assert resolve_engine("auto", lambda: NO_VLLM_NO_GPU) == "emulator"
    assert resolve_engine("emulator", lambda: pytest.fail("emulator needs no probe")) == "emulator"


def test_asking_for_vllm_names_what_is_missing() -> None:
    with pytest.raises(VllmUnavailableError, match=r"vllm package is not installed .*hotspan\[vllm\].*no CUDA GPU"):
        resolve_engine("vllm", lambda: NO_VLLM_NO_GPU)
    with pytest.raises(VllmUnavailableError) as only_gpu:
        resolve_engine("vllm", lambda: NO_GPU)
    assert "no CUDA GPU is visible" in str(only_gpu.value) and "not installed" not in str(only_gpu.value)
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        resolve_engine("tgi")


def test_hidden_gpus_count_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert cuda_gpus() == ()
    assert "CUDA_VISIBLE_DEVICES='-1'" in VllmAvailability(vllm_version="0.33.0", gpus=cuda_gpus()).missing[0]


def test_stack_run_with_engine_vllm_fails_clearly_here(capsys: pytest.CaptureFixture[str]) -> None:
    if probe_vllm().usable:
        pytest.skip("this machine can run vLLM")
    argv = ["stack", "run", "--workload", "azure-conv", "--endpoint", "http://127.0.0.1:9", "--engine", "vllm"]
    assert hotspan_main(argv) == 2
    assert "engine 'vllm' cannot run here: the vllm package is not installed" in capsys.readouterr().err


def test_the_engine_variable_is_read_when_no_option_is_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if probe_vllm().usable:
        pytest.skip("this machine can run vLLM")
    monkeypatch.setenv(ENV_STACK_ENGINE, "vllm")
    assert hotspan_main(["stack", "run", "--workload", "azure-conv", "--endpoint", "http://127.0.0.1:9"]) == 2
    assert "engine 'vllm' cannot run here" in capsys.readouterr().err


def test_the_in_process_stack_refuses_vllm() -> None:
    with (
        pytest.raises(ValueError, match=r"use supervisor\.ProcessStack"),
        Stack(StackConfig(engine_backend="vllm"), InMemorySpans()),
    ):
        pass


# The vllm serve command line ------------------------------------------------------------------------------


def _args(config: StackConfig, **kwargs: object) -> list[str]:
    return serve_args(config.engine, model_dir=Path("/m"), port=8123, otlp_traces_endpoint="http://c:4317", **kwargs)


def test_clean_settings_map_onto_vllm_flags() -> None:
    config = StackConfig()
    args = _args(config)
    assert args[0] == "/m"
    expected = {
        "--host": "127.0.0.1",
        "--port": "8123",
        "--served-model-name": config.engine.served_model_name,
        "--tokenizer": "/m",
        "--load-format": "dummy",
        "--max-model-len": "131072",
        "--max-num-seqs": "64",
        "--max-num-batched-tokens": "4096",
        "--block-size": "16",
        "--num-gpu-blocks-override": "16384",
        "--otlp-traces-endpoint": "http://c:4317",
        "--gpu-memory-utilization": "0.3",
    }
    assert {flag: _flag(args, flag) for flag in expected} == expected
    assert "--enable-prefix-caching" in args and "--no-enable-prefix-caching" not in args
    assert "--enforce-eager" in args
    assert "--collect-detailed-traces" not in args and "--ssl-certfile" not in args


@pytest.mark.parametrize(
    ("fault", "flag", "value"),
    [("queue_saturation", "--max-num-seqs", "1"), ("decode_bound", "--max-num-seqs", "256")],
)
def test_scheduler_faults_change_max_num_seqs(fault: str, flag: str, value: str) -> None:
    assert _flag(_args(apply_faults(StackConfig(), [fault])), flag) == value


def test_prefix_cache_off_turns_vllms_prefix_cache_off() -> None:
    args = _args(apply_faults(StackConfig(), ["prefix_cache_off"]))
    assert "--no-enable-prefix-caching" in args and "--enable-prefix-caching" not in args


def test_faults_outside_the_engine_leave_the_command_line_alone() -> None:
    clean = _args(StackConfig())
    engine_faults = {"queue_saturation", "decode_bound", "prefix_cache_off", "connection_per_request"}
    for name in FAULTS.keys() - engine_faults:
        assert _args(apply_faults(StackConfig(), [name])) == clean, name


def test_connection_per_request_serves_vllm_over_https(tmp_path: Path) -> None:
    config = apply_faults(StackConfig(), ["connection_per_request"])
    assert config.engine_tls
    tls = CertificateFiles(certfile=tmp_path / "cert.pem", keyfile=tmp_path / "key.pem")
    launch = vllm_launch(config.engine, model_dir=Path("/m"), otlp_endpoint=None, tls=tls, port=8443)
    args = list(launch.command)
    assert _flag(args, "--ssl-certfile") == str(tls.certfile) and _flag(args, "--ssl-keyfile") == str(tls.keyfile)
    assert launch.url == "https://127.0.0.1:8443" and launch.verify == str(tls.certfile)
    assert "--otlp-traces-endpoint" not in args


def test_launch_runs_vllm_serve_with_offline_otel_env() -> None:
    engine = EngineConfig(service_name="vllm-a")
    grpc = vllm_launch(engine, model_dir=Path("/m"), otlp_endpoint="http://127.0.0.1:4317", protocol="grpc", port=1)
    assert grpc.command[:5] == (sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "/m")
    assert _flag(list(grpc.command), "--otlp-traces-endpoint") == "http://127.0.0.1:4317"
    assert grpc.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "grpc"
    assert grpc.env["OTEL_SERVICE_NAME"] == "vllm-a"
    assert grpc.env["HF_HUB_OFFLINE"] == "1" and grpc.env["VLLM_NO_USAGE_STATS"] == "1"
    http = vllm_launch(engine, model_dir=Path("/m"), otlp_endpoint="http://127.0.0.1:4318", port=1)
    assert _flag(list(http.command), "--otlp-traces-endpoint") == "http://127.0.0.1:4318/v1/traces"
    assert http.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    # The configuration reaches vLLM's default tracer provider as resource attributes (config_resource).
    resource = dict(pair.split("=") for pair in http.env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    assert resource["vllm.config.max_num_seqs"] == str(engine.scheduler.max_num_seqs)
    assert resource["vllm.config.model"] == engine.served_model_name
    assert resource["vllm.config.enable_prefix_caching"] == "true"


def test_detailed_traces_and_extra_args_are_passed_on() -> None:
    settings = VllmSettings(collect_detailed_traces="all", enforce_eager=False, extra_args=("--max-logprobs", "5"))
    args = _args(StackConfig(), settings=settings)
    assert _flag(args, "--collect-detailed-traces") == "all"
    assert "--enforce-eager" not in args and args[-2:] == ["--max-logprobs", "5"]


# The tiny model directory ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", max_model_len=4096)


def test_tiny_model_directory_is_complete(tiny_model: Path) -> None:
    assert sorted(p.name for p in tiny_model.iterdir()) == sorted(MODEL_FILES)
    config = json.loads((tiny_model / "config.json").read_text())
    tokenizer = HfTokenizer.from_file(str(tiny_model / "tokenizer.json"))
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 2 and config["hidden_size"] == 256 and config["head_dim"] == 64
    assert config["max_position_embeddings"] == 4096
    assert config["vocab_size"] == tokenizer.get_vocab_size(with_added_tokens=True)
    assert (config["bos_token_id"], config["eos_token_id"]) == (
        tokenizer.token_to_id(BOS_TOKEN),
        tokenizer.token_to_id(EOS_TOKEN),
    )
    assert config["eos_token_id"] == config["vocab_size"] - 1
    generation = json.loads((tiny_model / "generation_config.json").read_text())
    assert generation["eos_token_id"] == config["eos_token_id"]
    assert not list(tiny_model.glob("*.safetensors")) and not list(tiny_model.glob("*.bin"))


def test_tiny_model_tokenizer_is_the_stacks(tiny_model: Path) -> None:
    """Ordinary text gets the same ids as under the stack's tokenizer, so prompt token counts agree."""
    tokenizer = HfTokenizer.from_file(str(tiny_model / "tokenizer.json"))
    stack = HfTokenizer.from_file(str(tokenizer_file()))
    text = default_tokenizer().synthesize(300, seed=3) + ". What is the refund policy?"
    assert tokenizer.encode(text, add_special_tokens=False).ids == stack.encode(text, add_special_tokens=False).ids
    assert tokenizer.encode(f"{BOS_TOKEN}hello{EOS_TOKEN}").ids[0] == tokenizer.token_to_id(BOS_TOKEN)


def test_chat_template_joins_contents_as_the_emulator_does(tiny_model: Path) -> None:
    template = json.loads((tiny_model / "tokenizer_config.json").read_text())["chat_template"]
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "refund policy?"}]
    rendered = jinja2.Environment().from_string(template).render(messages=messages, add_generation_prompt=True)
    assert rendered == "be brief refund policy?"


def test_transformers_loads_the_tiny_model(tiny_model: Path) -> None:
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (vLLM brings it)")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tiny_model), local_files_only=True)
    config = transformers.AutoConfig.from_pretrained(str(tiny_model), local_files_only=True)
    assert tokenizer.eos_token == EOS_TOKEN and config.vocab_size == len(tokenizer)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "refund policy?"}], tokenize=False)
    assert prompt == "refund policy?"


# The launcher, against real processes ---------------------------------------------------------------------


@pytest.fixture
def otlp_sink(serve: Serve) -> tuple[str, list[bytes]]:
    """A minimal OTLP/HTTP receiver on loopback: its base URL and the bodies it got."""
    bodies: list[bytes] = []
    app = FastAPI(title="otlp-sink")

    @app.post("/v1/traces")
    async def traces(request: Request) -> Response:
        bodies.append(await request.body())
        return Response(b"", media_type="application/x-protobuf")

    return serve(app), bodies


def test_launcher_runs_the_emulator_entry_point(tmp_path: Path, otlp_sink: tuple[str, list[bytes]]) -> None:
    endpoint, bodies = otlp_sink
    agent = StackConfig().agent.model_copy(update={"model": MODEL})
    config = StackConfig(
        engine=EngineConfig(served_model_name=MODEL, max_model_len=512, time_model=StepTimeModel(speed=100)),
        agent=agent.model_copy(update={"max_model_len": 512}),
    )
    launch = emulator_launch(config, endpoint)
    log = tmp_path / "logs" / "engine.log"
    with EngineProcess(launch, log, start_timeout_s=60) as engine:
        assert engine.returncode is None
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        client_config = LlmClientConfig(base_url=engine.url, model=MODEL, max_model_len=512)

        async def ask() -> None:
            async with LlmClient(client_config, provider.get_tracer("test"), tokenizer_file()) as client:
                result = await client.chat(
                    [{"role": "user", "content": "refund policy?"}], max_tokens=4, temperature=0.7, top_p=0.9
                )
                assert result.output_tokens == 4

        asyncio.run(ask())
    assert engine.stop() == 0, engine.log_tail()
    assert log.is_file()
    assert bodies, "the engine process exported its llm_request span on shutdown"


def test_a_process_that_dies_early_is_reported_with_its_log(tmp_path: Path) -> None:
    script = (
        "import sys; print('loading tiny model'); print('RuntimeError: no CUDA device', file=sys.stderr); sys.exit(3)"
    )
    launch = EngineLaunch(
        name="vllm", command=(sys.executable, "-c", script), url=f"http://127.0.0.1:{free_loopback_port()}"
    )
    with pytest.raises(EngineStartError) as error, EngineProcess(launch, tmp_path / "vllm.log", start_timeout_s=30):
        pass
    message = str(error.value)
    assert "vllm engine" in message and "exited with status 3 during start-up" in message
    assert "loading tiny model" in message and "RuntimeError: no CUDA device" in message


def test_a_process_that_never_gets_healthy_is_stopped(tmp_path: Path) -> None:
    script = "import time; print('still loading', flush=True); time.sleep(120)"
    launch = EngineLaunch(
        name="slow", command=(sys.executable, "-c", script), url=f"http://127.0.0.1:{free_loopback_port()}"
    )
    process = EngineProcess(launch, tmp_path / "slow.log", start_timeout_s=1.5, stop_timeout_s=5)
    with pytest.raises(EngineStartError, match=r"not healthy within 1.5 s[\s\S]*still loading"):
        process.start()
    assert process.returncode is not None


def test_vllm_launch_without_vllm_fails_with_the_import_error(tmp_path: Path) -> None:
    """The real ``vllm serve`` launch path, up to the point where the missing package stops it."""
    if probe_vllm().vllm_version is not None:
        pytest.skip("vLLM is installed here")
    engine = EngineConfig(max_model_len=1024, scheduler=SchedulerConfig(num_gpu_blocks=128))
    process = vllm_engine_process(engine, tmp_path, otlp_endpoint="http://127.0.0.1:4317", protocol="grpc")
    with pytest.raises(EngineStartError, match=r"No module named 'vllm"):
        process.start()
    assert (tmp_path / "model" / "config.json").is_file() and (tmp_path / "vllm.log").is_file()


def test_process_stack_with_vllm_reports_the_engines_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``ProcessStack`` starts vLLM first, through the launcher; without vLLM it stops there, cleanly."""
    if probe_vllm().vllm_version is not None:
        pytest.skip("vLLM is installed here")
    monkeypatch.setenv("HOTSPAN_STACK_CACHE", str(tmp_path))
    stack = ProcessStack(StackConfig(engine_backend="vllm"), "http://127.0.0.1:9", start_timeout_s=30)
    with (
        pytest.raises(EngineStartError, match=r"vllm engine .* exited with status 1[\s\S]*No module named 'vllm"),
        stack,
    ):
        pass
    assert (tmp_path / "vllm.log").is_file()
    with pytest.raises(RuntimeError, match="not open"):
        _ = stack.urls


# Attribute parity -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.7, 0.0])
def test_emulator_llm_request_carries_vllm_v1s_attribute_set(
    in_memory_spans: InMemorySpans, serve: Serve, temperature: float
) -> None:
    """Real HTTP through the stack's LLM client; ``temperature=0`` drops its attribute, as in vLLM."""
    engine = EngineConfig(served_model_name=MODEL, max_model_len=512, time_model=StepTimeModel(speed=100))
    url = serve(create_engine_app(engine, in_memory_spans("vllm")))
    client_spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(client_spans))

    async def ask() -> None:
        config = LlmClientConfig(base_url=url, model=MODEL, max_model_len=512)
        async with LlmClient(config, provider.get_tracer("test"), tokenizer_file()) as client:
            await client.chat([{"role": "user", "content": "hello"}], max_tokens=3, temperature=temperature, top_p=0.9)

    asyncio.run(ask())
    (span,) = in_memory_spans.spans("vllm")
    (chat,) = [s for s in client_spans.get_finished_spans() if s.name == f"chat {MODEL}"]
    expected = LLM_REQUEST_ATTRIBUTES - ({VllmSpanAttributes.REQUEST_TEMPERATURE} if temperature == 0 else set())
    assert set(span.attributes or {}) == expected
    assert span.kind == SpanKind.SERVER and chat.kind == SpanKind.CLIENT
    assert span.parent is not None and span.parent.span_id == chat.context.span_id
    assert span.context.trace_id == chat.context.trace_id


def test_the_attribute_list_is_reference_mds() -> None:
    assert len(LLM_REQUEST_ATTRIBUTES) == 14
    assert {name.split(".")[1] for name in LLM_REQUEST_ATTRIBUTES} == {"latency", "usage", "request", "response"}
    assert LLM_REQUEST_OPTIONAL_ATTRIBUTES < LLM_REQUEST_ATTRIBUTES
