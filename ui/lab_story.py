"""The lab's story: what its runs and comparisons show, each sentence chosen by their numbers.

Pure functions of core.lab and core.induction results, returning Markdown; no streamlit, no
training. views/lab.py composes them with the figures.
"""

from __future__ import annotations

from core import induction, lab
from ui import induction_charts
from ui.numbers import percent


def solved_sentence(solved: int, total: int) -> str:
    return f"{solved} of {total}"


def p_value(p: float) -> str:
    """A Fisher p as the page writes it: three decimals, or "p < 0.001"."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def counts(more: int, fewer: int, n: int) -> str:
    """'10 of 10 against 4 of 10, p = 0.005': two counts and the one-sided Fisher p that the
    first solved more often than chance would give."""
    return (
        f"{solved_sentence(more, n)} against {solved_sentence(fewer, n)}, "
        f"{p_value(lab.more_often_p(more, fewer, n))}"
    )


def step_moved(run: lab.TrainingRun, share: float) -> int:
    """The first step by which the probe's map has made `share` of its total movement
    (core.lab.map_moves summed over the run's snapshots)."""
    moved = lab.map_moves(run.probe_attention).cumsum()  # (k − 1,) after snapshot 1, 2, …
    if moved.size == 0 or moved[-1] <= 0:
        return 0
    first = int((moved >= share * moved[-1]).argmax())  # the first snapshot that reaches it
    return int(run.snapshot_steps[first + 1])


def play_story(run: lab.TrainingRun) -> str:
    """Where this run's map moves, in its steps, and so why Play's frames are spaced as they
    are (ui/lab_charts.play_indices)."""
    half, most = step_moved(run, 0.5), step_moved(run, 0.9)
    return (
        f"In this run the map has made half of its moves by step {half} and 90% of them by "
        f"step {most} of {run.settings.steps}. Play spaces its frames by those moves: where the "
        "map changes fast every step gets a frame, and a stretch where it sits still is crossed "
        "in a few."
    )


def task_verdict(comparison: lab.Comparison, name: str) -> str:
    """What the comparison shows on one task, each sentence chosen by the counts, each count
    with its Fisher p."""
    verdict = comparison.verdict(name)
    n = verdict.seeds
    scaled, unscaled = verdict.scaled, verdict.unscaled
    narrow, wide = verdict.unscaled_narrow, verdict.scaled_wide
    sentences = [f"**{lab.TASKS[name].title}**:"]
    if verdict.scale_helps:
        sentences.append(
            f"the scaled head solved clearly more often ({counts(scaled, unscaled, n)})."
        )
    elif verdict.scale_hurts:
        sentences.append(
            f"the unscaled head solved clearly more often ({counts(unscaled, scaled, n)})."
        )
    elif scaled == unscaled:
        sentences.append(
            f"scaled and unscaled heads solved equally often ({solved_sentence(scaled, n)} "
            f"each): with {n} seeds, these runs do not show the scale deciding the outcome here."
        )
    else:
        ahead, behind = max(scaled, unscaled), min(scaled, unscaled)
        sentences.append(
            f"scaled and unscaled heads were not clearly apart ({solved_sentence(scaled, n)} "
            f"against {solved_sentence(unscaled, n)}, {p_value(lab.more_often_p(ahead, behind, n))}"
            f"): with {n} seeds, these runs do not show the scale deciding the outcome here."
        )
    narrow_start = (
        f"Started at the scaled spread, the unscaled head solved {solved_sentence(narrow, n)}"
    )
    narrow_against = (
        f"the {solved_sentence(unscaled, n)} from its own start "
        f"({p_value(lab.more_often_p(narrow, unscaled, n))})"
    )
    if verdict.narrow_start_rescues:
        still_behind = lab.clearly_more(scaled, narrow, n)
        sentences.append(
            f"{narrow_start}: clearly more than {narrow_against}, so a narrow start rescued "
            + ("it in part (still clearly fewer than the scaled head)." if still_behind else "it.")
        )
    else:
        sentences.append(
            f"{narrow_start}: not clearly more than {narrow_against}"
            + (", so a narrow start did not rescue it." if verdict.scale_helps else ".")
        )
    wide_start = (
        f"Started at the unscaled spread, the scaled head solved {solved_sentence(wide, n)}"
    )
    wide_against = (
        f"the {solved_sentence(scaled, n)} from its own start "
        f"({p_value(lab.more_often_p(scaled, wide, n))})"
    )
    if verdict.wide_start_hurts:
        sentences.append(
            f"{wide_start}: clearly fewer than {wide_against}, so a wide start cost it runs."
        )
    else:
        sentences.append(
            f"{wide_start}: not clearly fewer than {wide_against}, so it got out of a wide start."
        )
    if verdict.story in ("start", "training", "both"):
        sentences.append(
            {
                "start": "So on these seeds the starting spread explains the difference.",
                "training": "So on these seeds the start does not explain the difference: what "
                "is left is how training moves the scores.",
                "both": "So on these seeds the start explains part of the difference, not all "
                "of it.",
            }[verdict.story]
        )
    return " ".join(sentences)


def mechanism(comparison: lab.Comparison, name: str) -> str:
    """The training explanation, checked on one task: spread growth and locked rows, measured
    on the unscaled head started at the scaled spread against the scaled head (same start)."""
    title = lab.TASKS[name].title
    steps = comparison.snapshot_steps(name)
    first_interval = int(steps[1])
    narrow_growth = comparison.early_growth(name, lab.UNSCALED_NARROW)
    scaled_growth = comparison.early_growth(name, lab.SCALED)
    ratio = comparison.growth_ratio(name)
    faster = ratio >= 1.5  # a clear difference in speed, not noise around 1
    sentence = (
        f"**{title}**: from the same start, the unscaled head's median score spread grew by "
        f"{narrow_growth:.1f} in the first {first_interval} steps, the scaled head's by "
        f"{scaled_growth:.1f}"
        + (
            f", {ratio:.1f} times as much (√d_head = {comparison.d_head**0.5:.1f})."
            if faster
            else ": about as fast, so here the steps do not move unscaled scores further."
        )
    )
    peak_narrow = comparison.peak_locked(name, lab.UNSCALED_NARROW)
    peak_scaled = comparison.peak_locked(name, lab.SCALED)
    final_narrow = float(comparison.mean_locked(name, lab.UNSCALED_NARROW)[-1])
    if peak_narrow > 2 * peak_scaled and peak_narrow >= 0.01:
        sentence += (
            f" At worst {peak_narrow:.0%} of its rows had {lab.LOCKED_WEIGHT:.0%} or more of "
            f"their weight on one wrong key, against {peak_scaled:.0%} for the scaled head"
            + (
                f"; {final_narrow:.0%} were still locked after the last step."
                if final_narrow >= 0.5 * peak_narrow
                else "; most of them came free again by the last step."
            )
        )
    else:
        sentence += " Its rows did not lock onto wrong keys more than the scaled head's did."
    return sentence


def first_crossing(crossings: dict[tuple[int, int], int]) -> tuple[str, int] | None:
    """The head that reached the bar first, and its step."""
    if not crossings:
        return None
    (layer, head), step = min(crossings.items(), key=lambda item: item[1])
    return induction_charts.head_name(layer, head), step


def two_layer_story(run: induction.InductionRun) -> str:
    """What the two-layer run did, every sentence chosen by its numbers."""
    settings, bar = run.settings, induction_charts.CROSSING_BAR
    sentences = []
    if run.solved_at is not None:
        sentences.append(
            f"Training stopped after {run.steps} steps, when the held-out loss on the repeat "
            f"fell below {settings.solved_loss} nats."
        )
    else:
        sentences.append(
            f"Training ran all {run.steps} steps; the held-out loss on the repeat ended at "
            f"{run.probe_repeated_loss[-1]:.2f} nats, above the {settings.solved_loss} that "
            "counts as solved."
        )
    fall = run.fall()
    if fall is not None and fall.steps <= run.steps / 4:
        sentences.append(
            f"It did not fall evenly: from step {fall.from_step} ({fall.from_loss:.2f} nats) "
            f"to step {fall.to_step} ({fall.to_loss:.2f}) it made most of its way down from a "
            f"uniform guess, in {fall.steps} of the run's steps: a phase change."
        )
    elif fall is not None:
        sentences.append(
            f"It fell gradually: from {fall.from_loss:.2f} nats at step {fall.from_step} to "
            f"{fall.to_loss:.2f} at step {fall.to_step}, no sudden drop."
        )
    inductive = first_crossing(run.crossings(bar, "induction"))
    previous = first_crossing(
        {at: step for at, step in run.crossings(bar, "previous_token").items() if at[0] == 0}
    )
    final = run.scores_at(-1)
    last_layer = settings.n_layers - 1
    induction_heads = [
        induction_charts.head_name(*at) for at in final.at_least("induction", bar) if at[0]
    ]
    if inductive is not None:
        sentences.append(
            f"{inductive[0]} was the first head whose induction score reached {bar:g}, at step "
            f"{inductive[1]}; after the last step, "
            + (
                f"{len(induction_heads)} head{'s' if len(induction_heads) != 1 else ''} of "
                f"layer {last_layer} score {bar:g} or more ({', '.join(induction_heads)})."
                if induction_heads
                else f"no head of layer {last_layer} is above {bar:g}."
            )
        )
    else:
        sentences.append(f"No head's induction score reached {bar:g}.")
    prev_layer, prev_head, prev_score = final.best("previous_token")
    if previous is not None and inductive is not None:
        order = (
            "before"
            if previous[1] < inductive[1]
            else "at the same measurement as"
            if previous[1] == inductive[1]
            else "after"
        )
        sentences.append(
            f"In layer 0, {previous[0]}'s previous-token score reached {bar:g} at step "
            f"{previous[1]}, {order} the first induction head: "
            + (
                "the two kinds of head grew together, as a circuit whose parts are of use only "
                "with each other."
                if order != "before"
                else "the head that layer 1 reads came first."
            )
        )
    elif prev_layer == 0:
        sentences.append(
            f"The strongest previous-token head is {induction_charts.head_name(0, prev_head)} "
            f"({prev_score:.2f} after the last step): part of the job can be spread over "
            "several layer-0 heads."
        )
    first_half = float(run.probe_first_half_loss[-1])
    if first_half > settings.chance_loss:
        sentences.append(
            f"The first copy's held-out loss ended at {first_half:.2f} nats, worse than a "
            f"uniform guess ({settings.chance_loss:.2f}). No word of the first copy appeared "
            "before, yet the heads still look back and the model predicts, with confidence, "
            "a word it copied from earlier: wrong, and wrong costs more than an even guess. "
            "Nothing punishes it, since the loss trains the repeat only."
        )
    else:
        sentences.append(
            f"The first copy's held-out loss ended at {first_half:.2f} nats, against "
            f"{settings.chance_loss:.2f} for a uniform guess."
        )
    return " ".join(sentences)


def one_layer_story(one: induction.InductionRun, two: induction.InductionRun | None) -> str:
    """What the one-layer run did, beside the two-layer run when there is one."""
    settings, bar = one.settings, induction_charts.CROSSING_BAR
    loss = float(one.probe_repeated_loss[-1])
    layer, head, best = one.scores_at(-1).best("induction")
    sentences = [
        f"With one layer, after {one.steps} steps, the held-out loss on the repeat is "
        f"{loss:.2f} nats"
        + (
            f" (two layers: {float(two.probe_repeated_loss[-1]):.2f} after {two.steps} steps)."
            if two is not None
            else "."
        ),
        f"Its best induction score is {best:.2f} ({induction_charts.head_name(layer, head)})"
        + (
            f", below {bar:g}: no head finds the word after the earlier copy."
            if best < bar
            else f", at or above {bar:g}: a head found the answer without a layer to read from."
        ),
    ]
    if loss < settings.chance_loss:
        sentences.append(
            f"It still beats a uniform guess ({settings.chance_loss:.2f}): one layer can learn "
            "that the next word is probably one already seen in the sequence, and spread its "
            "bet over those, without knowing which of them comes next."
        )
    return " ".join(sentences)


def scale_takeaway(shown: lab.TrainingRun, other: lab.TrainingRun) -> str:
    """The shown run against the same run with √d_k the other way (lab.with_other_scale): what
    the switch changes, in held-out accuracy and rows locked on a wrong key."""
    scaled, unscaled = (shown, other) if shown.settings.scale else (other, shown)
    scaled_right, unscaled_right = (
        float(scaled.eval_accuracy[-1]),
        float(unscaled.eval_accuracy[-1]),
    )
    locked = float(unscaled.locked_share[-1])
    numbers = (
        f"with 1/√d_k the head gets {percent(scaled_right)} of the held-out tokens right, "
        f"without it {percent(unscaled_right)}"
    )
    if abs(scaled_right - unscaled_right) < 0.02:
        return (
            f"**At d_head {shown.settings.d_head}, √d_k makes no visible difference to this "
            f"run**: {numbers}. Try a wider head."
        )
    better = "with" if scaled_right > unscaled_right else "without"
    stuck = f" ({locked:.0%} of its rows locked on a wrong key)" if locked >= 0.01 else ""
    return (
        f"**At d_head {shown.settings.d_head}, this run learns better {better} 1/√d_k**: "
        f"{numbers}{stuck}, same seed and batches. Press ▶ Play to see each step's share in "
        "the figure's title; flip the switch to watch the other run."
    )
