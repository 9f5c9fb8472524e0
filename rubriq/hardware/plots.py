"""The paper's Fig. 8: KL divergence per backend per circuit with the threshold line."""

from __future__ import annotations

from pathlib import Path


def kl_plot(rows: list[dict], out: str | Path, threshold: float = 0.05) -> Path:
    """KL per backend per circuit as bars, with the flag threshold (Fig. 8 style)."""
    from rubriq.evaluation.plots import _pyplot, save

    plt = _pyplot()
    rows = [r for r in rows if r.get("kl") is not None]
    circuits = list(dict.fromkeys(r["circuit"] for r in rows))
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    width = 0.8 / max(1, len(backends))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(circuits) * max(1, len(backends)) / 2 + 3), 4))
    for i, b in enumerate(backends):
        by = {r["circuit"]: r for r in rows if r["backend"] == b}
        xs = [c + i * width for c in range(len(circuits))]
        mode = next(iter(by.values()))["mode"]
        ax.bar(
            xs,
            [by[c]["kl"] if c in by else 0 for c in circuits],
            width,
            label=f"{b} ({'hardware' if mode == 'hardware' else 'offline noisy emulation'})",
        )
    ax.axhline(threshold, color="crimson", linestyle="--", label=f"threshold {threshold}")
    ax.set_xticks(
        [c + width * (len(backends) - 1) / 2 for c in range(len(circuits))], circuits, rotation=20, ha="right"
    )
    ax.set(
        ylabel="KL(sampled || noiseless) [nats]",
        xlabel="circuit",
        title=f"Output-distribution divergence, {rows[0]['shots'] if rows else ''} shots",
    )
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return save(fig, out)
