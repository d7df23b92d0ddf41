"""The environment fingerprint (CPU instruction sets, oneDNN's default), the diff of two
environments, the tolerance profile it selects, and the report's environment lines."""

from __future__ import annotations

import copy

import pytest

import tracekit
from tracekit.comparison.envdiff import default_profile, environment_diff, numerics
from tracekit.environment import parse_cpuinfo
from tracekit.tf_environment import onednn_default
from tracekit.report.environment import diff_lines, isa_summary, summary

# First processor blocks of /proc/cpuinfo, trimmed to the fields read.
INTEL_SPR = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd avx512bw avx512vl \
avx512_bf16 avx512_vnni avx512_fp16 amx_bf16 amx_tile amx_int8 avx_vnni

processor\t: 1
vendor_id\t: GenuineIntel
"""
AMD_MILAN = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 sha_ni
"""
ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes sha2 crc32 atomics fphp asimdhp asimddp sve i8mm bf16
CPU implementer\t: 0x41
CPU architecture: 8
CPU part\t: 0xd40
"""


def test_cpuinfo_keeps_the_flags_that_select_kernels():
    intel = parse_cpuinfo(INTEL_SPR)
    assert intel["vendor"] == "GenuineIntel" and intel["model"] == "Intel(R) Xeon(R) Platinum 8488C"
    assert {"avx512f", "avx512_vnni", "avx512_fp16", "amx_tile", "fma"} <= set(intel["isa"])
    assert "fpu" not in intel["isa"] and "sse" not in intel["isa"]  # not kernel-selecting: left out
    amd = parse_cpuinfo(AMD_MILAN)
    assert amd["isa"] == ["avx", "avx2", "f16c", "fma", "sse4_1", "sse4_2"]
    arm = parse_cpuinfo(ARM)
    assert arm["vendor"] == "0x41" and {"asimd", "sve", "bf16", "i8mm"} <= set(arm["isa"])
    assert parse_cpuinfo("")["isa"] is None  # nothing known is not "no extensions"
    assert isa_summary(intel["isa"]) == "AMX +FMA" and isa_summary(amd["isa"]) == "AVX2 +FMA"
    assert isa_summary(None) == "ISA unknown"


def test_onednn_default_follows_tensorflows_rule():
    amx = parse_cpuinfo(INTEL_SPR)["isa"]
    avx2 = parse_cpuinfo(AMD_MILAN)["isa"]
    assert onednn_default("2.21.0", amx) is True
    assert onednn_default("2.21.0", avx2) is False
    assert onednn_default("1.15.5", amx) is False  # TF 1.x pip builds have no oneDNN ops
    assert onednn_default("2.21.0", None) is None


def meta(tf="1.15.5", isa=("avx", "avx2", "fma"), onednn=False, cap=None, threads=2, gpus=(), cpu="AMD EPYC",
         model="1", variables=None):
    """The metadata a recording on such a machine would carry."""
    devices = [{"name": "/device:CPU:0", "type": "CPU"}, {"name": "/device:XLA_CPU:0", "type": "XLA_CPU"}]
    devices += [{"name": "/device:GPU:%d" % i, "type": "GPU"} for i, _ in enumerate(gpus)]
    return {
        "environment": {"python": "3.7.16", "machine": "x86_64", "cpu": cpu, "numpy": "1.18.5",
                        "cpu_vendor": "AuthenticAMD", "cpu_family": "25", "cpu_model": model,
                        "cpu_isa": None if isa is None else list(isa), "cpu_caches": {"L2": "1024K"},
                        "env": dict(variables or {}, PYTHONHASHSEED="0")},
        "tensorflow": {"version": tf, "devices": devices, "threads": {"intra_op": threads, "inter_op": threads},
                       "onednn": {"enabled": onednn, "default": False, "env": None, "max_cpu_isa": cap},
                       "xla_jit": "off", "determinism": False, "tf32": True,
                       "gpus": [{"name": g, "compute_capability": "9.0"} for g in gpus],
                       "cuda": "12.5.1", "cudnn": "9"},
    }


def test_same_machine_is_exact():
    diff = environment_diff(meta(), copy.deepcopy(meta()))
    assert diff.same_kernels and diff.same_framework and not diff.changes
    profile = default_profile(diff, False)
    assert profile.name == "exact" and "bit for bit" in profile.reason
    assert diff_lines(diff)[-1] == "environments: nothing that selects kernels differs"


def test_other_cpu_selects_the_roundoff_bound_and_says_why():
    golden = meta(isa=("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"), cpu="AMD EPYC 9R14", model="17")
    diff = environment_diff(golden, meta())
    assert [c.field for c in diff.kernel_changes] == ["cpu model", "cpu instruction sets"]
    assert [c.field for c in diff.changes if not c.kernels] == ["cpu"]  # the name: shown, not counted
    assert not diff.same_kernels and diff.same_framework
    profile = default_profile(diff, False)
    assert profile.name == "round-off" and "cpu instruction sets" in profile.reason
    text = "\n".join(diff_lines(diff))
    assert "golden only: avx512_vnni avx512bw avx512f" in text
    assert "AVX-512 VNNI +FMA -> AVX2 +FMA" in text


@pytest.mark.parametrize("field, changed", [
    ("oneDNN", meta(onednn=True)),
    ("oneDNN ISA cap", meta(cap="SSE41")),
    ("intra-op threads", meta(threads=16)),
    ("devices", meta(gpus=("NVIDIA H100",))),
    ("cpu model", meta(model="17")),
    ("numerics variables", meta(variables={"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"})),
])
def test_each_kernel_selecting_setting_counts(field, changed):
    diff = environment_diff(meta(), changed)
    assert field in [c.field for c in diff.kernel_changes]
    assert default_profile(diff, False).name == "round-off"


def test_gpu_settings_count_only_with_a_gpu():
    no_gpu = meta()
    no_gpu["tensorflow"].update(tf32=False, cuda="11.2", cudnn="8")
    assert environment_diff(meta(), no_gpu).same_kernels  # TF32 is a GPU matmul mode, CUDA a GPU library
    gpu_a, gpu_b = meta(gpus=("NVIDIA H100",)), meta(gpus=("NVIDIA H100",))
    gpu_b["tensorflow"].update(tf32=False, cudnn="8")
    diff = environment_diff(gpu_a, gpu_b)
    assert [c.field for c in diff.kernel_changes] == ["TF32", "CUDA, cuDNN"]
    text = "\n".join(diff_lines(diff))
    assert "TF32: on -> off" in text and "CUDA 12.5.1, cuDNN 9 -> CUDA 12.5.1, cuDNN 8" in text
    assert "GPU NVIDIA H100 (compute capability 9.0)" in summary(diff.golden)


def test_a_port_keeps_the_default_tolerance():
    diff = environment_diff(meta(), meta(tf="2.21.0"))
    assert not diff.same_framework and [c.field for c in diff.kernel_changes] == ["tensorflow"]
    assert not diff.machine_changes
    profile = default_profile(diff, False)
    assert profile.name == "default" and "1.15.5 vs 2.21.0" in profile.reason
    # Other code (a port against its golden) gets it even on the same TensorFlow and machine.
    same = environment_diff(meta(tf="2.21.0"), meta(tf="2.21.0"))
    assert same.same_kernels and default_profile(same, True).name == "default"
    assert "a port compared with its golden" in default_profile(same, True).reason
    asked = default_profile(same, False, "round-off")
    assert asked.name == "round-off" and asked.reason == "asked for"
    with pytest.raises(tracekit.UsageError):
        default_profile(same, False, "loose")


def test_old_traces_without_the_fields_open_and_count_as_unknown():
    old = {"environment": {"python": "3.7.16", "machine": "x86_64", "cpu": "AMD EPYC"},
           "tensorflow": {"version": "1.15.5", "devices": [{"name": "cpu", "type": "CPU"}]}}
    diff = environment_diff(old, meta())
    unknown = [c.field for c in diff.kernel_changes if c.unknown]
    assert "cpu instruction sets" in unknown and "oneDNN" in unknown and "intra-op threads" in unknown
    assert default_profile(diff, False).name == "round-off"  # nothing proves the kernels the same
    assert "ISA unknown" in summary(numerics(old))
    assert "not recorded by the golden" in "\n".join(diff_lines(diff))
    # Written through the store alone, with no TensorFlow driving it: the default tolerance.
    assert default_profile(environment_diff({}, {}), False).name == "default"


def test_same_instruction_sets_on_another_processor_is_not_bit_for_bit():
    """Eigen sizes its blocks from the cache sizes: the same ISA is not the same kernel."""
    a, b = meta(), meta(model="17")
    a["environment"].update(cpu_caches={"L2": "512K", "L3": "32768K"})
    fields = [c.field for c in environment_diff(a, b).kernel_changes]
    assert fields == ["cpu model", "cpu caches"]
    text = "\n".join(diff_lines(environment_diff(a, b)))
    assert "cpu model: AuthenticAMD 25 1 -> AuthenticAMD 25 17" in text
    assert "cpu caches: L2 512K, L3 32768K -> L2 1024K" in text


def test_unavailable_is_a_value_not_recorded_is_not():
    """A machine without /sys cache information records that it could not tell: two such runs
    on it still agree; a trace that never recorded the field does not."""
    a, b = meta(), meta()
    a["environment"]["cpu_caches"] = b["environment"]["cpu_caches"] = None
    assert environment_diff(a, b).same_kernels
    del b["environment"]["cpu_caches"]
    change = environment_diff(a, b).kernel_changes[0]
    assert (change.field, change.golden, change.unknown) == ("cpu caches", "unavailable", True)


def test_a_port_on_a_gpu_gets_the_gpu_profile_tf32_included():
    golden, actual = meta(), meta(tf="2.21.0", gpus=("NVIDIA H100",))
    profile = default_profile(environment_diff(golden, actual), True)
    assert profile.name == "gpu" and "TensorFloat-32" in profile.reason
    tolerance = profile.tolerance
    assert tolerance.resolve("grad", "w", 5, "float32").ulps == 16384  # TF32 at every step
    actual["tensorflow"]["tf32"] = False
    profile = default_profile(environment_diff(golden, actual), True)
    assert "TensorFloat-32" not in profile.reason
    assert profile.tolerance.resolve("tap", "t", 0, "float32").ulps == 64  # GPU round-off at step 0
    assert default_profile(environment_diff(golden, meta(tf="2.21.0")), True).name == "default"


def test_a_port_under_mixed_precision_gets_the_mixed_precision_profile():
    golden, actual = meta(), meta(tf="2.21.0")
    actual["tensorflow"]["dtype_policy"] = "mixed_float16"
    profile = default_profile(environment_diff(golden, actual), True)
    assert profile.name == "mixed-precision" and "mixed_float16" in profile.reason
    tolerance = profile.tolerance
    assert tolerance.resolve("var", "w", 0, "float32").ulps == 8192
    assert tolerance.resolve("var", "w", 1, "float32").ignore and not tolerance.resolve("loss", "l", 1, "float32").ignore
    assert tolerance.resolve("loss", "l", 1, "float32").rtol == 0.05
    # The same code under the same policy is no port: the usual profiles apply.
    assert default_profile(environment_diff(actual, copy.deepcopy(actual)), False).name == "exact"


def test_grappler_switches_show_in_the_diff_from_either_tensorflow():
    tf1 = meta()
    tf1["tensorflow"]["session_config"] = {"graph_options": "rewrite_options {\n  arithmetic_optimization: OFF\n}"}
    tf2 = meta(tf="2.21.0")
    tf2["tensorflow"]["grappler"] = {"disable_meta_optimizer": False}
    fields = {c.field: (c.golden, c.actual) for c in environment_diff(tf1, tf2).changes}
    assert fields["Grappler options"] == ("arithmetic_optimization=off", "default")


@pytest.mark.parametrize("section, framework, told", [
    ("torch", "PyTorch 2.13.0+cpu", {"mkldnn": True, "threads": 1, "deterministic": False}),
    ("jax", "JAX 0.10.2", {"xla_flags": "", "matmul_precision": "None"}),
])
def test_a_port_in_another_framework_is_told_by_its_own_fields(section, framework, told):
    # TensorFlow's fields say nothing of a PyTorch or JAX replay: never "not recorded (an older tracekit?)"
    actual = meta()
    del actual["tensorflow"]
    actual[section] = dict(told, version=framework.split()[1])
    diff = environment_diff(meta(), actual)
    assert numerics(actual)["framework"] == framework and "tensorflow" not in numerics(actual)
    assert not [c for c in diff.changes if c.unknown], diff.changes
    changed = {c.field: (c.golden, c.actual) for c in diff.kernel_changes}
    assert changed.pop("framework") == ("TensorFlow 1.15.5", framework)
    assert changed == ({"oneDNN": (False, True), "intra-op threads": (2, 1)} if section == "torch" else {})
    lines = diff_lines(diff)
    assert lines[1].startswith("actual ran on      %s, AMD EPYC" % framework) and "older tracekit" not in "".join(lines)
    profile = default_profile(diff, True)
    assert profile.name == "default" and "(TensorFlow 1.15.5 vs %s)" % framework in profile.reason
