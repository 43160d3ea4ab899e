"""Conversion benchmark: time and peak memory of checkpoint -> GGUF -> quantized GGUF.

Writes a random-weight checkpoint in the published layout (``--quick``: scaled down, about
0.3 GB; default: Qwen3.5-2B's exact text shapes, about 3.8 GB), then runs the real pipeline
(convert, quantize, verify; not registered).  Peak memory is measured per process with
``getrusage``: the checkpoint is written by one child process and the conversion runs in another,
so each figure is that step's own high-water mark (quantize and verify run as children of the
conversion process and are reported together).  Prints figures, then one JSON object last.

    python benchmarks/convert.py --quick [--quant Q4_K_M] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqale_desktop.core.models.convert.tiny_checkpoint import TinyDims  # noqa: E402

QUICK = TinyDims(
    hidden=1024, layers=8, ffn=3072, heads=8, kv_heads=2, head_dim=128, linear_k_heads=8,
    linear_v_heads=16, linear_head_dim=128, vocab_size=32768, vision_hidden=64,
)  # fmt: skip
FULL_2B = TinyDims(
    hidden=2048, layers=24, ffn=6144, heads=8, kv_heads=2, head_dim=256, linear_k_heads=16,
    linear_v_heads=16, linear_head_dim=128, vocab_size=248320, vision_hidden=64,
)  # fmt: skip


def _mib_maxrss(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


def _write(folder: str, dims: str) -> None:
    from sqale_desktop.core.models.convert.tiny_checkpoint import write_tiny_checkpoint

    started = time.monotonic()
    write_tiny_checkpoint(Path(folder), dims=TinyDims(**json.loads(dims)), with_mtp=True)
    print(
        json.dumps({"write_s": time.monotonic() - started, "peak_rss_mib": _mib_maxrss(resource.RUSAGE_SELF)})
    )


def _convert(folder: str, work: str, quant: str, threads: int) -> None:
    from sqale_desktop.core.models.convert import ConvertOptions, convert_model

    baseline = _mib_maxrss(resource.RUSAGE_SELF)
    started = time.monotonic()
    result = convert_model(
        Path(folder),
        ConvertOptions(quant=quant, threads=threads, register=False, output_dir=Path(work) / "out",
                       work_dir=Path(work) / "work"),
    )  # fmt: skip
    print(
        json.dumps(
            {
                "total_s": time.monotonic() - started,
                "seconds": result.seconds,
                "baseline_rss_mib": baseline,
                "convert_peak_rss_mib": _mib_maxrss(resource.RUSAGE_SELF),
                "children_peak_rss_mib": _mib_maxrss(resource.RUSAGE_CHILDREN),
                "intermediate_bytes": result.intermediate_bytes,
                "result_bytes": result.size,
                "tensors": result.tensors,
                "mtp_written": result.mtp_written,
            }
        )
    )


def _child(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(done.returncode)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="scaled-down checkpoint (under a minute)")
    parser.add_argument("--quant", default="Q4_K_M")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child-write", nargs=2, metavar=("FOLDER", "DIMS"), help=argparse.SUPPRESS)
    parser.add_argument("--child-convert", nargs=2, metavar=("FOLDER", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_write:
        return _write(*args.child_write)
    if args.child_convert:
        return _convert(*args.child_convert, args.quant, args.threads)

    dims = QUICK if args.quick else FULL_2B
    with tempfile.TemporaryDirectory(prefix="sqale-convert-bench-") as tmp:
        folder = str(Path(tmp) / "checkpoint")
        written = _child("--child-write", folder, json.dumps(asdict(dims)))
        ckpt_bytes = sum(p.stat().st_size for p in Path(folder).glob("*.safetensors"))
        run = _child("--child-convert", folder, tmp, "--quant", args.quant, "--threads", str(args.threads))
    seconds = run["seconds"]
    assert isinstance(seconds, dict)
    print(f"checkpoint: {ckpt_bytes / 2**20:.0f} MiB ({'quick' if args.quick else 'Qwen3.5-2B text shapes'})")
    print(
        f"unquantized GGUF: {int(str(run['intermediate_bytes'])) / 2**20:.0f} MiB, {run['tensors']} tensors"
    )
    print(f"{args.quant} GGUF: {int(str(run['result_bytes'])) / 2**20:.0f} MiB")
    print(f"convert: {seconds['convert']:.1f} s, peak RSS {run['convert_peak_rss_mib']:.0f} MiB")
    print(f"quantize: {seconds['quantize']:.1f} s, verify: {seconds['verify']:.1f} s, "
          f"peak RSS of those children {run['children_peak_rss_mib']:.0f} MiB")  # fmt: skip
    print(
        json.dumps(
            {
                "benchmark": "convert",
                "mode": "quick" if args.quick else "2b",
                "quant": args.quant,
                "threads": args.threads,
                "checkpoint_mib": round(ckpt_bytes / 2**20, 1),
                "intermediate_mib": round(int(str(run["intermediate_bytes"])) / 2**20, 1),
                "result_mib": round(int(str(run["result_bytes"])) / 2**20, 1),
                "write_checkpoint_s": round(float(str(written["write_s"])), 2),
                "convert_s": round(seconds["convert"], 2),
                "quantize_s": round(seconds["quantize"], 2),
                "verify_s": round(seconds["verify"], 2),
                "convert_baseline_rss_mib": round(float(str(run["baseline_rss_mib"])), 1),
                "convert_peak_rss_mib": round(float(str(run["convert_peak_rss_mib"])), 1),
                "quantize_verify_peak_rss_mib": round(float(str(run["children_peak_rss_mib"])), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
