#!/usr/bin/env python3
"""Writes the /metrics pages under fixtures/ that are shaped like each server's real output.

The pages are committed; this script is how they were made and how to remake them after a change
(`python3 scripts/gen-fixtures.py`). It is deterministic: the same numbers every run, because the
unit tests assert on them. Series names, label sets, bucket layouts and the Python process and
HTTP collector series follow what vLLM (V1 engine), llama.cpp's server (--metrics), SGLang
(--enable-metrics), TGI and Triton print; values are chosen to make the tests readable.
"""

import os
import random

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CREATED = 1732950000.123

# vLLM's bucket layouts (seconds, tokens).
TTFT_LE = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
           2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_LE = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
          5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
LATENCY_LE = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
              50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
TOKENS_LE = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]


def fmt(v):
    if v == float("inf"):
        return "+Inf"
    if isinstance(v, int) or float(v).is_integer():
        return f"{float(v):.1f}"
    return repr(float(v))


def labels(d):
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


class Page:
    def __init__(self, prefix=""):
        self.lines = []
        self.prefix = prefix

    def meta(self, name, kind, text):
        self.lines.append(f"# HELP {name} {text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name, lab, value):
        self.lines.append(f"{name}{labels(lab) if lab else ''} {fmt(value)}")

    def gauge(self, name, text, series):
        self.meta(name, "gauge", text)
        for lab, v in series:
            self.sample(name, lab, v)

    def counter(self, name, text, series, created=True):
        self.meta(name, "counter", text)
        for lab, v in series:
            self.sample(name + "_total", lab, v)
        if created:
            self.meta(name + "_created", "gauge", text)
            for lab, _ in series:
                self.sample(name + "_created", lab, CREATED)

    def histogram(self, name, text, series, les, created=True):
        """series: list of (labels, per-bucket counts (non-cumulative, len(les)+1), sum)."""
        self.meta(name, "histogram", text)
        for lab, counts, total in series:
            cum = 0
            for le, c in zip(les + [float("inf")], counts):
                cum += c
                self.sample(name + "_bucket", {**lab, "le": fmt(le)}, cum)
            self.sample(name + "_count", lab, cum)
            self.sample(name + "_sum", lab, total)
        if created:
            self.meta(name + "_created", "gauge", text)
            for lab, _, _ in series:
                self.sample(name + "_created", lab, CREATED)

    def text(self):
        return "\n".join(self.lines) + "\n"


def spread(total, n, rng, skew=2.0):
    """total observations spread over n buckets, front-loaded, deterministic."""
    weights = [rng.random() ** skew for _ in range(n)]
    s = sum(weights)
    counts = [int(total * w / s) for w in weights]
    counts[0] += total - sum(counts)
    return counts


def python_process(page, cpu_seconds):
    page.meta("python_gc_objects_collected_total", "counter", "Objects collected during gc")
    for g, v in (("0", 20134.0), ("1", 3111.0), ("2", 1207.0)):
        page.sample("python_gc_objects_collected_total", {"generation": g}, v)
    page.meta("python_gc_collections_total", "counter", "Number of times this generation was collected")
    for g, v in (("0", 1843.0), ("1", 167.0), ("2", 12.0)):
        page.sample("python_gc_collections_total", {"generation": g}, v)
    page.gauge("python_info", "Python platform information",
               [({"implementation": "CPython", "major": "3", "minor": "12", "patchlevel": "9", "version": "3.12.9"}, 1.0)])
    page.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", [({}, 5.4613e10)])
    page.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", [({}, 2.8147e9)])
    page.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", [({}, 1.73295e9)])
    page.meta("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
    page.sample("process_cpu_seconds_total", {}, cpu_seconds)
    page.gauge("process_open_fds", "Number of open file descriptors.", [({}, 87.0)])
    page.gauge("process_max_fds", "Maximum number of open file descriptors.", [({}, 1048576.0)])


def http_collector(page, requests):
    page.meta("http_requests_total", "counter", "Total number of requests by method, status and handler.")
    for handler, share in (("/v1/chat/completions", 0.7), ("/v1/completions", 0.25), ("/metrics", 0.05)):
        page.sample("http_requests_total", {"handler": handler, "method": "POST" if handler != "/metrics" else "GET", "status": "2xx"}, float(int(requests * share)))


def vllm(engines, model=MODEL, old_kv=False, cpu_seconds=1234.5, seed=1, ttft=None, extra_models=()):
    """engines: list of dicts with running, waiting, kv, prompt, generation, success."""
    rng = random.Random(seed)
    page = Page()
    python_process(page, cpu_seconds)
    http_collector(page, sum(e["success"] for e in engines))
    models = [model] + list(extra_models)
    sets = [(m, i, e) for m in models for i, e in enumerate(engines)]

    def lab(m, i, **more):
        return {"engine": str(i), "model_name": m, **more}

    page.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
               [(lab(m, i), e["running"]) for m, i, e in sets])
    page.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
               [(lab(m, i), e["waiting"]) for m, i, e in sets])
    kv_name = "vllm:gpu_cache_usage_perc" if old_kv else "vllm:kv_cache_usage_perc"
    page.gauge(kv_name, "KV-cache usage. 1 means 100 percent usage.",
               [(lab(m, i), e["kv"]) for m, i, e in sets])
    page.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                 [(lab(m, i), e["prompt"] * 1.0) for m, i, e in sets])
    page.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                 [(lab(m, i), float(int(e["prompt"] * 0.31))) for m, i, e in sets])
    page.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                 [(lab(m, i), e.get("preemptions", 0.0)) for m, i, e in sets])
    page.counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                 [(lab(m, i), e["prompt"]) for m, i, e in sets])
    page.counter("vllm:generation_tokens", "Number of generation tokens processed.",
                 [(lab(m, i), e["generation"]) for m, i, e in sets])
    page.counter("vllm:request_success", "Count of successfully processed requests.",
                 [(lab(m, i, finished_reason=r), float(int(e["success"] * share)))
                  for m, i, e in sets for r, share in (("stop", 0.8), ("length", 0.19), ("abort", 0.01))])
    for name, text, les in (
        ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKENS_LE),
        ("vllm:request_generation_tokens", "Number of generation tokens processed.", TOKENS_LE),
        ("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]),
        ("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", TOKENS_LE),
        ("vllm:request_params_n", "Histogram of the n request parameter.", [1, 2, 5, 10, 20]),
        ("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", TOKENS_LE),
    ):
        page.histogram(name, text, [(lab(m, i), spread(e["success"], len(les) + 1, rng), e["success"] * 211.0) for m, i, e in sets], les)
    ttft_series = []
    for m, i, e in sets:
        counts = ttft if ttft is not None else spread(e["success"], len(TTFT_LE) + 1, rng, 3.0)
        ttft_series.append((lab(m, i), counts, sum(counts) * 0.21))
    page.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_series, TTFT_LE)
    for name, text, les in (
        ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_LE),
        ("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", ITL_LE),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", LATENCY_LE),
        ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", LATENCY_LE),
        ("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", LATENCY_LE),
        ("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", LATENCY_LE),
        ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", LATENCY_LE),
    ):
        page.histogram(name, text, [(lab(m, i), spread(e["success"], len(les) + 1, rng), e["success"] * 3.7) for m, i, e in sets], les)
    page.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
               [({"block_size": "16", "cache_dtype": "auto", "calculate_kv_scales": "False",
                  "enable_prefix_caching": "True", "engine": "0", "gpu_memory_utilization": "0.9",
                  "num_cpu_blocks": "None", "num_gpu_blocks": "24828", "prefix_caching_hash_algo": "sha256",
                  "swap_space": "4", "swap_space_bytes": "4294967296"}, 1.0)])
    return page.text()


def engine(running, waiting, kv, generation=184220.0, prompt=912345.0, success=1730, **more):
    return dict(running=running, waiting=waiting, kv=kv, generation=generation, prompt=prompt, success=success, **more)


def ttft_counts(cumulative):
    """Per-bucket counts for TTFT_LE + [+Inf] from a {le: cumulative} map (missing = previous)."""
    out, prev = [], 0
    for le in TTFT_LE + [float("inf")]:
        cum = cumulative.get(le, prev)
        out.append(cum - prev)
        prev = cum
    return out


def llamacpp():
    return """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 482113
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 61.874
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 93127
# HELP llamacpp:tokens_predicted_seconds_total Predict process time
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 2310.52
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 41822
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode counter
llamacpp:n_busy_slots_per_decode 3.61
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 7791.9
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s.
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 40.3
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 3
"""


def sglang(running, queue, usage, generation, ttft_cum, cpu):
    page = Page()
    lab = {"model_name": "qwen/qwen2.5-7b-instruct"}
    page.gauge("sglang:num_running_reqs", "The number of running requests.", [(lab, running)])
    page.gauge("sglang:num_used_tokens", "The number of used tokens.", [(lab, 48211.0)])
    page.gauge("sglang:token_usage", "The token usage.", [(lab, usage)])
    page.gauge("sglang:gen_throughput", "The generation throughput (token/s).", [(lab, 2211.4)])
    page.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", [(lab, queue)])
    page.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", [(lab, 0.42)])
    page.counter("sglang:prompt_tokens", "Number of prefill tokens processed.", [(lab, 3.4e6)], created=False)
    page.counter("sglang:generation_tokens", "Number of generation tokens processed.", [(lab, generation)], created=False)
    page.counter("sglang:num_requests", "Number of requests processed.", [(lab, 8121.0)], created=False)
    les = [0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 120.0, 160.0]
    counts, prev = [], 0
    for le in les + [float("inf")]:
        cum = ttft_cum.get(le, prev)
        counts.append(cum - prev)
        prev = cum
    page.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", [(lab, counts, prev * 0.4)], les, created=False)
    page.meta("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
    page.sample("process_cpu_seconds_total", {}, cpu)
    return page.text()


def tgi():
    return """# TYPE tgi_request_count counter
tgi_request_count 1822
# TYPE tgi_request_success counter
tgi_request_success 1809
# TYPE tgi_queue_size gauge
tgi_queue_size 6
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 32
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 41250
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="1"} 3
tgi_request_generated_tokens_bucket{le="10"} 120
tgi_request_generated_tokens_bucket{le="100"} 801
tgi_request_generated_tokens_bucket{le="1000"} 1790
tgi_request_generated_tokens_bucket{le="+Inf"} 1809
tgi_request_generated_tokens_sum 402133
tgi_request_generated_tokens_count 1809
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{le="0.005"} 1200
tgi_request_queue_duration_bucket{le="0.5"} 1700
tgi_request_queue_duration_bucket{le="5"} 1809
tgi_request_queue_duration_bucket{le="+Inf"} 1809
tgi_request_queue_duration_sum 301.2
tgi_request_queue_duration_count 1809
"""


def triton(pending, request_us, queue_us, compute_us, success):
    models = (("llama-3-8b", 0.75), ("ensemble_pre", 0.25))
    lines = [
        "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes",
        "# TYPE nv_inference_request_success counter",
    ]
    for m, share in models:
        lines.append(f'nv_inference_request_success{{model="{m}",version="1"}} {int(success * share)}')
    lines += ["# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes",
              "# TYPE nv_inference_request_failure counter"]
    for m, _ in models:
        lines.append(f'nv_inference_request_failure{{model="{m}",reason="REJECTED",version="1"}} 0')
    for name, total, text in (
        ("nv_inference_request_duration_us", request_us, "Cumulative inference request duration in microseconds (includes cached requests)"),
        ("nv_inference_queue_duration_us", queue_us, "Cumulative inference queuing duration in microseconds (includes cached requests)"),
        ("nv_inference_compute_input_duration_us", compute_us * 0.05, "Cumulative compute input duration in microseconds (does not include cached requests)"),
        ("nv_inference_compute_infer_duration_us", compute_us, "Cumulative compute inference duration in microseconds (does not include cached requests)"),
        ("nv_inference_compute_output_duration_us", compute_us * 0.02, "Cumulative inference compute output duration in microseconds (does not include cached requests)"),
    ):
        lines += [f"# HELP {name} {text}", f"# TYPE {name} counter"]
        for m, share in models:
            lines.append(f'{name}{{model="{m}",version="1"}} {int(total * share)}')
    lines += ["# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.",
              "# TYPE nv_inference_pending_request_count gauge"]
    for m, share in models:
        lines.append(f'nv_inference_pending_request_count{{model="{m}",version="1"}} {int(pending * share)}')
    lines += ["# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)",
              "# TYPE nv_gpu_utilization gauge",
              'nv_gpu_utilization{gpu_uuid="GPU-8e7b3c1a-52f1-4d0b-9c3e-1f2a3b4c5d6e"} 0.97',
              "# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes",
              "# TYPE nv_gpu_memory_used_bytes gauge",
              'nv_gpu_memory_used_bytes{gpu_uuid="GPU-8e7b3c1a-52f1-4d0b-9c3e-1f2a3b4c5d6e"} 7.6e+10']
    return "\n".join(lines) + "\n"


def sim_loaded():
    """llm-d-inference-sim's page with 2 running and 10 waiting (the seed's decide example)."""
    return """# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="cc-tiny"} 0
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} 1.7329511e+09
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="cc-tiny"} 2
# HELP vllm:num_requests_waiting Prometheus metric for the number of queued requests.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="cc-tiny"} 10
"""


def openmetrics():
    """A vLLM page as an OpenMetrics 1.0 exposition: UNIT, _created, an exemplar, CRLF, # EOF."""
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 12.0',
        "# TYPE vllm:num_requests_waiting gauge",
        f'vllm:num_requests_waiting{{engine="0",model_name="{MODEL}"}} 3.0',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        "# UNIT vllm:kv_cache_usage_perc ratio",
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="{MODEL}"}} 0.42',
        "# TYPE vllm:generation_tokens counter",
        "# UNIT vllm:generation_tokens tokens",
        f'vllm:generation_tokens_total{{engine="0",model_name="{MODEL}"}} 52000.0',
        f'vllm:generation_tokens_created{{engine="0",model_name="{MODEL}"}} {CREATED}',
        "# TYPE vllm:time_to_first_token_seconds histogram",
        "# UNIT vllm:time_to_first_token_seconds seconds",
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="{MODEL}"}} 80.0 # {{trace_id="4bf92f3577b34da6"}} 0.067 {CREATED}',
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="1.0",model_name="{MODEL}"}} 99.0',
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="{MODEL}"}} 100.0',
        f'vllm:time_to_first_token_seconds_count{{engine="0",model_name="{MODEL}"}} 100.0',
        f'vllm:time_to_first_token_seconds_sum{{engine="0",model_name="{MODEL}"}} 9.1',
        f'vllm:time_to_first_token_seconds_created{{engine="0",model_name="{MODEL}"}} {CREATED}',
        "# TYPE process_cpu_seconds counter",
        "# UNIT process_cpu_seconds seconds",
        "process_cpu_seconds_total 88.5",
        "# EOF",
    ]
    return "\r\n".join(lines) + "\r\n"


def write(rel, text):
    path = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        f.write(text)


def main():
    write("vllm-busy.prom", vllm([engine(48, 17, 0.93, preemptions=14.0)], cpu_seconds=5120.25))
    write("vllm-idle.prom", vllm([engine(0, 0, 0.0, generation=1.2e6, prompt=5.1e6, success=8122)], cpu_seconds=20011.5, seed=2))
    write("vllm-two-engines.prom", vllm([engine(30, 5, 0.81), engine(28, 7, 0.95, generation=190002.0)], seed=3))
    write("vllm-old-gauge.prom", vllm([engine(9, 0, 0.37)], old_kv=True, seed=4))
    write("vllm-openmetrics.prom", openmetrics())
    write("sim-loaded.prom", sim_loaded())
    write("llamacpp.prom", llamacpp())
    write("sglang.prom", sglang(37, 4, 0.71, 2.1e6, {0.1: 10, 0.4: 600, 1.0: 900, 2.0: 990, float("inf"): 1000}, 901.0))
    write("tgi.prom", tgi())
    write("triton.prom", triton(8, 4.0e9, 1.0e9, 2.5e9, 120000))

    # Pairs: the same replica scraped 15 s apart.
    before = {0.25: 400, 0.5: 900, 0.75: 1000, 1.0: 1020, float("inf"): 1020}
    # In the 15 s: 90 new TTFTs at or below 0.75 s and 10 more in (0.75, 1.0], none above,
    # so the p95 (rank 95 of 100) sits half way through the le="1.0" bucket: 0.875 s.
    after = {0.25: 430, 0.5: 960, 0.75: 1090, 1.0: 1120, float("inf"): 1120}
    write("pairs/vllm-ttft-0.prom", vllm([engine(20, 0, 0.40, generation=100000.0)], cpu_seconds=1000.0, seed=5, ttft=ttft_counts(before)))
    write("pairs/vllm-ttft-1.prom", vllm([engine(24, 2, 0.48, generation=118000.0)], cpu_seconds=1015.0, seed=5, ttft=ttft_counts(after)))
    # A restart between the scrapes: every counter is lower in the second page.
    write("pairs/vllm-reset-0.prom", vllm([engine(20, 0, 0.40, generation=900000.0)], cpu_seconds=50000.0, seed=6, ttft=ttft_counts(before)))
    write("pairs/vllm-reset-1.prom", vllm([engine(3, 0, 0.05, generation=1500.0)], cpu_seconds=6.0, seed=6,
                                          ttft=ttft_counts({0.1: 8, 0.25: 10, float("inf"): 10})))
    # No request finished its first token between the scrapes: no TTFT, no tokens.
    write("pairs/vllm-quiet-0.prom", vllm([engine(0, 0, 0.0, generation=100000.0)], cpu_seconds=2000.0, seed=7, ttft=ttft_counts(before)))
    write("pairs/vllm-quiet-1.prom", vllm([engine(0, 0, 0.0, generation=100000.0)], cpu_seconds=2000.75, seed=7, ttft=ttft_counts(before)))
    # Triton: 15 s apart, 90 s of request time (6 in flight), 30 s of it queued, 52.5 s computing.
    write("pairs/triton-0.prom", triton(8, 4.0e9, 1.0e9, 2.5e9, 120000))
    write("pairs/triton-1.prom", triton(4, 4.09e9, 1.03e9, 2.5525e9, 121500))
    write("pairs/sglang-0.prom", sglang(37, 4, 0.71, 2.1e6, {0.1: 10, 0.4: 600, 1.0: 900, 2.0: 990, float("inf"): 1000}, 901.0))
    write("pairs/sglang-1.prom", sglang(40, 9, 0.80, 2.133e6, {0.1: 10, 0.4: 620, 1.0: 950, 2.0: 1090, 4.0: 1100, float("inf"): 1100}, 916.0))

    # Malformed pages.
    busy = vllm([engine(6, 2, 0.5)], seed=8).split("\n")
    busy.insert(3, 'vllm:num_requests_running{engine="1",model_name="x"')
    busy.insert(9, "vllm:num_requests_waiting{engine=\"1\"} lots")
    busy.insert(15, 'vllm:kv_cache_usage_perc{engine="1",model_name="a\\qb"} 0.9')
    write("malformed/broken-lines.prom", "\n".join(busy))
    write("malformed/garbage.prom", "<html><body>\n<h1>502 Bad Gateway</h1>\n</body></html>\n")
    write("malformed/no-server.prom", "# TYPE node_load1 gauge\nnode_load1 0.42\n# TYPE up gauge\nup 1\n")
    write("malformed/no-waiting.prom", "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n")

    # The benchmark page: a vLLM pod serving four models (base and LoRA adapters) on two engines.
    big = vllm([engine(48, 17, 0.93), engine(51, 12, 0.97)], seed=9,
               extra_models=("support-lora-v3", "summarise-lora-v1", "sql-lora-v7"))
    write("bench/vllm-large.prom", big)
    write("bench/vllm-large-nocolon.prom", big.replace("vllm:", "vllm_"))


if __name__ == "__main__":
    main()
