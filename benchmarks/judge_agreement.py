"""How often a judge agrees with hand labels: the judge presets (conf/judge/) on labelled
(gold, prediction) pairs, with the embedded default model as the judge (llama.cpp, CPU).

    python -m benchmarks.judge_agreement [--pairs benchmarks/judge_agreement/pairs.jsonl]
    python -m benchmarks.judge_agreement --model openai --set model=gpt-4o-mini   # another judge model

--model names a conf/model/ file (default: the embedded 1.5B, with a 2,048-token window), --set
overrides its keys one by one.

The pairs (judge_agreement/pairs.jsonl) are labelled by hand: answers from the CPU evaluations
(GraphRAG-Bench Novel and 2Wiki; `"source": "run"`) and, since the small model rarely answers a 2Wiki
question right in other words, answers written in the forms agents give (`"source": "written"`):
correct paraphrases and near misses (a wrong digit, a hedge, the gold named but contradicted). Each
preset is scored as it is and with its gold and prediction lines the other way round (same texts,
other order): the small judge is sensitive to that order. Every variant is scored in the same run,
over the same pairs, with exact-match skipping off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from omegaconf import OmegaConf

from arag.config.files import conf_path
from arag.evaluation.judge import CORRECT, INCORRECT, Judge, JudgeConfig
from arag.llm.factory import make_backend

PAIRS = Path(__file__).parent / "judge_agreement" / "pairs.jsonl"


def preset(name: str) -> dict:
    return {k: v for k, v in OmegaConf.to_container(OmegaConf.load(conf_path("judge", f"{name}.yaml"))).items() if k != "model"} | {"skip_exact": False}


def field_lines(template: str) -> tuple[str, str]:
    """The template's gold line and prediction line."""
    lines = template.splitlines()
    gold = [line for line in lines if "{gold}" in line]
    prediction = [line for line in lines if "{prediction}" in line]
    assert len(gold) == 1 and len(prediction) == 1, "a preset's gold and prediction fields changed: update this benchmark"
    return gold[0], prediction[0]


def reordered(cfg: dict, prediction_first: bool) -> dict:
    """The preset with its gold and prediction lines in the given order (same texts)."""
    gold, prediction = field_lines(cfg["user_template"])
    lines = cfg["user_template"].splitlines(keepends=True)
    i, j = sorted(k for k, line in enumerate(lines) if line.rstrip("\n") in (gold, prediction))
    first, second = (prediction, gold) if prediction_first else (gold, prediction)
    lines[i], lines[j] = lines[i].replace(lines[i].rstrip("\n"), first), lines[j].replace(lines[j].rstrip("\n"), second)
    return cfg | {"user_template": "".join(lines)}


def variants() -> dict[str, dict]:
    """Each preset in both field orders; the preset's own order is marked."""
    out = {}
    for name in ("paper", "strict"):
        cfg = preset(name)
        gold, prediction = field_lines(cfg["user_template"])
        own_first = cfg["user_template"].index(prediction) < cfg["user_template"].index(gold)
        for prediction_first in (False, True):
            label = f"{name}, {'prediction' if prediction_first else 'gold'} first" + (" (preset)" if prediction_first == own_first else "")
            out[label] = reordered(cfg, prediction_first)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--model", default="llamacpp_qwen2.5_coder_1.5b", help="a conf/model/ file name (without .yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key of the model config")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.pairs.read_text().splitlines() if line.strip()]
    model_cfg = OmegaConf.load(conf_path("model", f"{args.model}.yaml"))
    if args.model.startswith("llamacpp_"):
        model_cfg.n_ctx = 2048  # a judge prompt is short: a small window loads faster
    model_cfg = OmegaConf.merge(model_cfg, OmegaConf.from_dotlist(args.set))
    backend = make_backend(OmegaConf.to_container(model_cfg, resolve=True))
    print(f"{len(pairs)} labelled pairs ({sum(p['correct'] for p in pairs)} correct answers), judge {backend.model}")
    print("| judge | correct answers judged correct | wrong answers judged incorrect | agreement | on run answers | on written answers | no verdict |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, cfg in variants().items():
        judge = Judge(backend, JudgeConfig.from_dict(cfg))
        verdicts = [asyncio.run(judge.judge(p["question"], [p["gold"]], p["prediction"])) for p in pairs]
        # A judge that gave no verdict disagrees with the label either way (counted apart too).
        agree = [v.status in (CORRECT, INCORRECT) and (v.status == CORRECT) == p["correct"] for v, p in zip(verdicts, pairs)]
        pos = sum(a for a, p in zip(agree, pairs) if p["correct"])
        neg = sum(a for a, p in zip(agree, pairs) if not p["correct"])
        n_pos = sum(p["correct"] for p in pairs)
        by_source = {src: [a for a, p in zip(agree, pairs) if p["source"] == src] for src in ("run", "written")}
        print(
            f"| {name} | {pos} of {n_pos} | {neg} of {len(pairs) - n_pos} | {sum(agree) / len(agree):.0%} | "
            + " | ".join(f"{sum(v) / len(v):.0%} of {len(v)}" if v else "-" for v in by_source.values())
            + f" | {sum(v.status not in (CORRECT, INCORRECT) for v in verdicts)} |"
        )

if __name__ == "__main__":
    main()
