"""How often a judge agrees with hand labels: the judge presets (conf/judge/) on labelled
(gold, prediction) pairs, with the embedded default model as the judge (llama.cpp, CPU).

    python benchmarks/judge_agreement.py [--pairs benchmarks/judge_agreement/pairs.jsonl]

The pairs are answers from the CPU evaluations (GraphRAG-Bench Novel): correct paraphrases of the
gold answer and wrong answers, labelled by hand. Besides each preset as it is, the `paper` preset
with the predicted answer placed before the gold answer is scored: same texts, other order. Every
variant is scored in the same run, over the same pairs, with exact-match skipping off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from omegaconf import OmegaConf

from arag.conf_files import conf_path
from arag.evaluation.judge import CORRECT, Judge, JudgeConfig
from arag.llm.llamacpp import LlamaCppBackend

PAIRS = Path(__file__).parent / "judge_agreement" / "pairs.jsonl"


def preset(name: str) -> dict:
    return {k: v for k, v in OmegaConf.to_container(OmegaConf.load(conf_path("judge", f"{name}.yaml"))).items() if k != "model"} | {"skip_exact": False}


def variants() -> dict[str, dict]:
    paper = preset("paper")
    first, second = "Gold answer: {gold}", "Predicted answer: {prediction}"
    assert f"{first}\n{second}" in paper["user_template"], "the paper preset's field order changed: update this benchmark"
    swapped = paper | {"user_template": paper["user_template"].replace(f"{first}\n{second}", f"{second}\n{first}")}
    return {"paper": paper, "strict": preset("strict"), "paper, prediction first": swapped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.pairs.read_text().splitlines() if line.strip()]
    backend = LlamaCppBackend(n_ctx=2048)
    print(f"{len(pairs)} labelled pairs ({sum(p['correct'] for p in pairs)} correct answers), judge {backend.model}")
    print("| judge | correct answers judged correct | wrong answers judged incorrect | agreement |")
    print("| --- | ---: | ---: | ---: |")
    for name, cfg in variants().items():
        judge = Judge(backend, JudgeConfig.from_dict(cfg))
        said = [asyncio.run(judge.judge(p["question"], [p["gold"]], p["prediction"])).status == CORRECT for p in pairs]
        pos = sum(s for s, p in zip(said, pairs) if p["correct"])
        neg = sum(not s for s, p in zip(said, pairs) if not p["correct"])
        n_pos = sum(p["correct"] for p in pairs)
        print(f"| {name} | {pos} of {n_pos} | {neg} of {len(pairs) - n_pos} | {(pos + neg) / len(pairs):.0%} |")


if __name__ == "__main__":
    main()
