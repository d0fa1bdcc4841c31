"""11 · Attention, learned: train one head from scratch on a task whose answer is a pattern."""

import streamlit as st

from core import induction, lab
from ui import (
    display,
    induction_charts,
    induction_runs,
    lab_charts,
    lab_runs,
    lab_story,
    tables,
    takeaway,
    terms,
    widgets,
)
from ui.sidebar import CAUSAL_LABEL, SCALE_LABEL

widgets.page_title("11 · Attention, learned")
st.markdown(
    "Here one head learns from random numbers, on a task whose answer *is* an attention "
    "pattern: each token should put its weight on one particular other token. Press **Play** "
    "to watch it learn; change a switch and it learns again."
)

TASK_HELP = {
    "previous": "Each token attends to the token just before it (the first token to itself). "
    "The words are random, so only position can say which key that is.",
    "first": "Each token attends to the first place its word appears in the sequence, itself if "
    "it is the first. It must match words *and* prefer the earliest copy.",
    "bracket": "Each bracket attends to its partner. Every kind of bracket appears once per "
    "sequence, so the partner is the one other bracket of the same kind: a lookup by content. "
    "(Real bracket matching, with repeated kinds, needs the nesting depth, which one layer "
    "reading raw embeddings cannot count.)",
}

# ---- the switches, on the first screen, above the run they train ---------------------------------
task_column, d_head_column, steps_column, seed_column = st.columns([2, 1, 1, 1])
task_name = task_column.selectbox(
    "Task",
    list(lab.TASKS),
    index=list(lab.TASKS).index(lab_runs.PAGE_DEFAULTS.task),
    format_func=lambda name: lab.TASKS[name].title,
    key="lab_task",
    bind="query-params",
)
task = lab.TASKS[task_name]
d_head = d_head_column.select_slider(
    "d_head (= d_k)",
    [2, 4, 8, 16, 32, 64, 128],
    value=lab_runs.PAGE_DEFAULTS.d_head,
    key="lab_d_head",
    bind="query-params",
    help="The width of the head's queries and keys: the d_k that 1/√d_k divides by.",
)
LAB_STEPS = (100, 200, 300, 500)  # the run lengths the switches offer (at most MAX_STEPS)
steps = steps_column.select_slider(
    "Training steps",
    LAB_STEPS,
    value=lab_runs.PAGE_DEFAULTS.steps,
    key="lab_steps",
    bind="query-params",
)
with seed_column:
    seed = widgets.whole_number_input("Seed", 0, 9999, 0, key="lab_seed")
scale_column, start_column, more_column = st.columns([2, 3, 2])
scale = scale_column.toggle(  # the sidebar's wording: d_k, a query's and a key's width, is d_head
    SCALE_LABEL, value=True, key="lab_scale", bind="query-params"
)
other_start = start_column.toggle(
    "Start at the other head's score spread",
    value=False,
    key="lab_start",
    bind="query-params",
    help="Rescale W_q and W_k at the start by d_head^(∓¼): an unscaled head then starts with "
    "the score spread of a scaled one, and a scaled head with that of an unscaled one. "
    "Section 4 explains why.",
)
with more_column.expander("Mask, positions, loss"):
    causal = st.toggle(CAUSAL_LABEL, value=False, key="lab_causal", bind="query-params")
    positions = st.toggle("Position vectors", value=True, key="lab_positions", bind="query-params")
    loss_name = st.radio(
        "Loss",
        ["squared", "cross_entropy"],
        format_func={"squared": "squared error", "cross_entropy": "cross-entropy"}.get,
        key="lab_loss",
        bind="query-params",
        help=terms.ahead("cross-entropy", here="views/lab.py"),
    )
settings = lab.Settings(
    task=task_name,
    d_head=int(d_head),
    scale=bool(scale),
    causal=bool(causal),
    positions=bool(positions),
    loss=str(loss_name),
    seed=min(max(int(seed), 0), 9999),  # the URL may carry any number
    steps=min(int(steps), lab_runs.MAX_STEPS),
    start_at_other_spread=bool(other_start),
)
HISTORY = 4  # runs kept side by side
# Where the columns stand side by side, the target's map moves down by what the stepped figure
# has over its map (lab_charts.TOP_PX − TARGET_TOP_PX: tests/test_lab.py checks the number), so
# the two maps line up; below 641 px Streamlit stacks the columns and the target follows the
# figure above it without that empty band.
TARGET_BESIDE_STEPS_CSS = (
    "<style>@media (min-width: 641px) { .st-key-lab_target { padding-top: 110px; } }</style>"
)


def remember(chosen: lab.Settings) -> None:
    """Show this run, and keep it at the front of the runs compared side by side; a visit
    starts with the same run under the other √d_k switch beside it."""
    st.session_state["lab_trained"] = chosen
    history = st.session_state.get("lab_history") or [lab.with_other_scale(chosen)]
    earlier = [s for s in history if s != chosen]
    st.session_state["lab_history"] = [chosen, *earlier][:HISTORY]


# Every switch acts at once, as the sidebar's do on every other page: the page shows the run its
# switches describe, trained on a miss (bench/bench_lab.py times the runs; cached
# per server), so its first screen shows learning and a copied link reopens what is on screen.
# The switches may come from a link, which is visitor input, but a run is bounded by the clamped
# settings.
remember(settings)
shown_settings = settings


def watch_it_learn(shown: lab.Settings) -> None:
    """Section 1: the shown run played step by step, its answer, its numbers, and W_qᵀW_k."""
    run = lab_runs.trained_run(shown)
    st.subheader("1 · Watch it learn")
    takeaway.show(lab_story.scale_takeaway(run, lab_runs.trained_run(lab.with_other_scale(shown))))
    left, right = st.columns(2)
    with left:
        display.show_matrix(
            run.probe_attention.shape,
            None,
            lambda: lab_charts.learning_steps(run),
            "lab_learning",
            filename="lab-learning",
        )
    with right:
        st.html(TARGET_BESIDE_STEPS_CSS)
        display.show_matrix(
            run.target_pattern.shape,
            None,
            lambda: lab_charts.target_attention(run, beside_steps=True),
            "lab_target",
            filename="lab-target",
        )
        st.caption(f"The answer. {TASK_HELP[shown.task]}")
        top, bottom = st.columns(2), st.columns(2)
        # the run's end: the map beside them moves through the steps, these do not
        top[0].metric(
            f"Weight on the right key, step {run.snapshot_steps[-1]}", f"{run.eval_mass[-1]:.3f}"
        )
        top[1].metric(f"Accuracy, step {run.snapshot_steps[-1]}", f"{run.eval_accuracy[-1]:.1%}")
        bottom[0].metric("Score spread at step 0", f"{run.initial_score_std:.1f}")
        bottom[1].metric("Training time", f"{run.seconds:.2f} s")
    st.caption(
        f"{lab_charts.run_label(shown)}. After the last step, on {lab.N_EVAL_SEQUENCES} "
        "held-out sequences: the mean weight each token puts on its target key, and the share "
        "of tokens whose largest weight is on it (a tie does not count). The spread is the "
        "standard deviation of the scores before training."
        + (
            f" The causal mask hides the target of {1 - run.reachable_share:.0%} of the tokens."
            if run.reachable_share < 1
            else ""
        )
    )
    st.markdown(
        "The learned figure opens on step 0, before any training, and shows the weights of the "
        "probe sequence after the step on its slider; under them, the loss and the weight on "
        "the right key over the whole run (red: the step shown). "
        "**Play** runs the training; the slider picks one step. At step 0 the weights come from "
        "random vectors: spread over several keys when the score spread is small, often one "
        "bright cell per row on a wrong key when it is large (a wide unscaled head). Training "
        "pulls each row's weight onto its target. " + lab_story.play_story(run)
    )
    if shown.scale:
        st.latex(r"s_{ij} = x_i^{\top}\, \frac{W_q^{\top} W_k}{\sqrt{d_{\text{head}}}}\, x_j")
    else:
        st.latex(r"s_{ij} = x_i^{\top}\, W_q^{\top} W_k\, x_j")
    display.show_matrix(
        run.bilinear.shape,
        None,
        lambda: lab_charts.bilinear_steps(run),
        "lab_bilinear",
        filename="lab-wqwk",
    )
    sums = (
        "Because x_i is a word vector plus a position vector, every score is a sum of four "
        "entries of this map: word→word, word→position, position→word and position→position "
        "(p0, p1, … are the position vectors)."
        if shown.positions
        else "With the position vectors switched off, x_i is its word vector alone, so every "
        "score is one entry of this map, word→word: no head can tell where a word stands."
    )
    st.markdown(
        f"A score is a bilinear form: the matrix {lab_charts.bilinear_name(run)} says how much "
        f"each query direction likes each key direction. {sums} Blue: the query row pulls "
        "weight towards the key row; red: away. Its slider and **Play** step through the same "
        "steps as the figure above, on their own."
    )


def side_by_side(history: list[lab.Settings]) -> None:
    """Section 2: the last few runs trained, their curves and final maps next to each other."""
    st.subheader("2 · Your runs side by side")
    st.caption(
        "A visit starts with the run above and the same run with **Scale scores by 1/√d_k** "
        "flipped. Change any switch and its run joins at the top; the last "
        f"{HISTORY} runs stay for this visit, and a copied link carries only the run on screen."
    )
    runs = [lab_runs.trained_run(chosen) for chosen in history]
    names = [
        f"#{number} {lab_charts.run_label(chosen)}" for number, chosen in enumerate(history, 1)
    ]
    tables.static_table(
        {
            "run (#1 is the latest)": names,
            "weight on the right key": [float(run.eval_mass[-1]) for run in runs],
            "accuracy": [float(run.eval_accuracy[-1]) for run in runs],
            "score spread at the start": [run.initial_score_std for run in runs],
            "score spread at the end": [float(run.score_spread[-1]) for run in runs],
        },
        {
            "weight on the right key": 3,
            "accuracy": 3,
            "score spread at the start": 1,
            "score spread at the end": 1,
        },
    )
    display.show_figure(
        lab_charts.runs_side_by_side(runs, names), "lab_side_by_side", filename="lab-runs"
    )
    columns = st.columns(min(len(runs), 2))
    for number, (run, name) in enumerate(zip(runs, names, strict=True)):
        with columns[number % len(columns)]:
            display.show_matrix(
                run.probe_attention.shape,
                None,
                lambda run=run, name=name: lab_charts.final_attention(run, name),
                f"lab_final_{number}",
                filename=f"lab-run-{number + 1}",
            )
    st.caption(
        "Top: the held-out weight on the right key after each step; below: the spread (standard "
        "deviation) of the held-out scores, on a log axis. The maps show each run's probe "
        "sequence after its last step. The runs are kept for this visit only."
    )


watch_it_learn(shown_settings)
side_by_side(st.session_state.get("lab_history", [shown_settings]))

# 3 ---------------------------------------------------------------------------------------------
st.subheader("3 · The model")
# the formulas of the run on screen: its switches decide the positions and the scale
if shown_settings.positions:
    st.latex(r"x_i = E_{\text{tok}}[w_i] + E_{\text{pos}}[i]")
else:
    st.latex(r"x_i = E_{\text{tok}}[w_i] \quad \text{(position vectors switched off)}")
if shown_settings.scale:
    st.latex(r"s_{ij} = \frac{(W_q x_i)\cdot(W_k x_j)}{\sqrt{d_{\text{head}}}}")
else:
    st.latex(
        r"s_{ij} = (W_q x_i)\cdot(W_k x_j) \quad \text{(1/}\sqrt{d_{\text{head}}}\text{ switched off)}"
    )
st.latex(r"\alpha_i = \operatorname{softmax}(s_{i1}, \dots, s_{in})")
tables_of_vectors = (
    f"a table of {len(task.vocabulary)} word vectors and one of {task.n_tokens} position vectors"
    if shown_settings.positions
    else f"a table of {len(task.vocabulary)} word vectors (the position vectors are switched off)"
)
st.markdown(
    f"One head: {tables_of_vectors} (width {lab.D_MODEL}), and the two matrices W_q and W_k. "
    "Nothing else: "
    "the row of weights α_i *is* the prediction, so attention alone has to solve the task. "
    "(A full layer would read the answer out through the values; leaving them out keeps any "
    "other path from cheating.) Adam updates the parameters on a fresh batch of "
    f"{lab.Settings.batch_size} random sequences per step, with a step size (learning rate) "
    f"of {lab.Settings.learning_rate}. The loss compares each row with the one-hot row y_i of "
    "its target key t(i):",
    help=terms.ahead("Adam", here="views/lab.py"),
)
st.latex(r"L_{\text{squared}} = \frac{1}{n}\sum_i \sum_j (\alpha_{ij} - y_{ij})^2")
st.latex(r"L_{\text{cross-entropy}} = -\frac{1}{n}\sum_i \log \alpha_{i,\,t(i)}")

# 4 ---------------------------------------------------------------------------------------------
st.subheader("4 · Why divide by √d_head: many seeds, two explanations")
st.markdown(
    "Vaswani et al. (2017) scale the scores by 1/√d_k; they suspect that at large d_k the dot "
    "products grow large and push the softmax into regions where its gradient is tiny. Two "
    "readings of that claim about training can be told apart here:\n"
    "- **the start**: an unscaled wide head starts with a large score spread, so its rows "
    "begin almost one-hot, often on a wrong key, and cannot get out;\n"
    "- **the training**: Adam (Kingma & Ba, 2015) divides each update by a running size of its "
    "gradient, so every entry of W_q and W_k moves by about the learning rate per step, "
    "whatever the gradient. A score adds up d_head products of query and key entries, and "
    "without the 1/√d_head nothing shrinks that sum: the same steps can move an unscaled "
    "score further, and rows can saturate *during* training. How much further, the runs "
    "below measure.\n\n"
    "The switch **Start at the other head's score spread** separates them. It shrinks W_q and "
    "W_k of an unscaled head by d_head^¼ at the start, so its scores start exactly as spread "
    "as a scaled head's; on a scaled head it enlarges them by d_head^¼ instead. If the start "
    "is the trouble, the shrunk unscaled head should do as well as a scaled one."
)
left, middle, right = st.columns(3)
compare_d_head = left.select_slider(
    "d_head of these runs",
    list(lab_runs.COMPARISON_D_HEADS),
    value=lab_runs.ComparisonChoice.d_head,
    key="lab_cmp_d_head",
    bind="query-params",
)
compare_steps = middle.select_slider(
    "Steps of these runs",
    list(lab_runs.COMPARISON_STEPS),
    value=lab_runs.ComparisonChoice.steps,
    key="lab_cmp_steps",
    bind="query-params",
)
compare_loss = right.radio(
    "Loss of these runs",
    ["squared", "cross_entropy"],
    format_func={"squared": "squared error", "cross_entropy": "cross-entropy"}.get,
    key="lab_cmp_loss",
    bind="query-params",
)
choice = lab_runs.ComparisonChoice(
    d_head=int(compare_d_head), steps=int(compare_steps), loss=str(compare_loss)
)
seeds = lab_runs.COMPARISON_SEEDS
st.caption(
    f"{choice.runs()} runs: {len(lab.STARTS)} ways to start × {seeds} seeds × the tasks "
    f"{' and '.join(f'*{lab.TASKS[name].title}*' for name in lab_runs.COMPARISON_TASKS)}, other "
    "switches at their defaults. They train side by side when asked, once per server for each "
    "choice here, in the background: the rest of the page works meanwhile."
)


@st.fragment(run_every=1.0)
def comparison_progress() -> None:
    """While the comparison trains: its progress, redrawn every second; then the whole page."""
    state = lab_runs.comparison_or_progress(choice)
    if not isinstance(state, lab_runs.Progress) or state.error:
        st.rerun()  # trained (or failed): the whole page draws what follows from it
    st.progress(
        state.fraction, text=f"Training {choice.runs()} runs side by side: {state.fraction:.0%}"
    )


def comparison_results(comparison: lab.Comparison) -> None:
    """The table, the verdicts per task, the mechanism per task, and the curves."""
    n = comparison.seeds
    tables.static_table(
        {
            "start": [start.label for start in lab.STARTS],
            **{
                lab.TASKS[name].title: [
                    f"{comparison.solved(name, start)} of {n} · "
                    f"{comparison.mean_mass(name, start):.3f}"
                    for start in lab.STARTS
                ]
                for name in comparison.tasks
            },
        },
        {},
    )
    st.caption(
        f"Runs solved of {n} (seeds {comparison.seed_list[0]} to {comparison.seed_list[-1]}): "
        f"at least {lab.SOLVED_ACCURACY:.0%} of "
        f"{lab.N_EVAL_SEQUENCES} held-out sequences' tokens right after step {comparison.steps}. "
        "After the dot: the mean weight on the right key over the seeds. d_head "
        f"{comparison.d_head}, {comparison.loss.replace('_', '-')} loss; training took "
        f"{comparison.seconds:.0f} s on one thread of this server. "
        + (
            "Any cell is a run you can watch: set the switches at the top to the same task, "
            "d_head, steps, start, seed and loss."
            if comparison.steps in LAB_STEPS
            else f"The switches at the top train runs of at most {LAB_STEPS[-1]} steps, so "
            f"these {comparison.steps}-step runs are not among the runs you can watch there."
        )
    )
    st.markdown(
        "“Clearly” below means the counts differ by more than chance would explain with "
        f"{n} seeds: a one-sided Fisher exact test gives p, the chance of counts at least this "
        f"far apart if both heads solved equally often, below {lab.CLEAR_P}. Each count comes "
        "with its p; "
        "a verdict names only what these seeds show, and another block of seeds can move "
        "counts near the bar.",
        help=terms.ahead("Fisher exact test"),
    )
    for name in comparison.tasks:
        st.markdown(lab_story.task_verdict(comparison, name))
    st.markdown("#### Does training move unscaled scores further?")
    for name in comparison.tasks:
        st.markdown(lab_story.mechanism(comparison, name))
    if comparison.loss == "squared":
        st.markdown(
            "A row with nearly all its weight on one key has a nearly flat softmax: the "
            "squared error, like the loss of a real layer that reaches α only through the "
            "values it mixes, passes its gradient through that slope, so a locked row gets "
            "almost no push. The cross-entropy's log undoes the softmax's exponential: its "
            "gradient on the scores, α − y, stays large however saturated the row is. Choose "
            "**cross-entropy** above to train the same runs with it."
        )
    else:
        all_solved = all(
            comparison.solved(name, start) == n for name in comparison.tasks for start in lab.STARTS
        )
        st.markdown(
            "With the cross-entropy the log undoes the softmax's exponential, so its gradient "
            "on the scores, α − y, stays large however saturated a row is. "
            + (
                "Every run above was solved, scaled or not, from either start."
                if all_solved
                else "Not every run was solved even so: the table says which."
            )
        )
    for name in comparison.tasks:
        display.show_figure(
            lab_charts.comparison_curves(comparison, name),
            f"lab_comparison_{name}",
            filename=f"lab-comparison-{name}",
        )
    st.caption(
        "Solid: each head from its own start; dashed: from the other head's spread. Blue: "
        "scaled, red: unscaled. Top: the standard deviation of the held-out scores, the median "
        f"over the {n} seeds, on a log axis. Bottom: the share of held-out rows locked on a wrong "
        f"key, with {lab.LOCKED_WEIGHT:.0%} or more of their weight on it, the mean over the "
        "seeds."
    )


state = lab_runs.comparison_or_progress(choice, start=False)  # trained already, or under way
if state is None and st.button(
    f"Train the {choice.runs()} runs", key="lab_cmp_start", icon=":material/model_training:"
):
    state = lab_runs.comparison_or_progress(choice)
if state is None:
    st.caption("Nobody has trained these runs on this server yet.")
elif not isinstance(state, lab_runs.Progress):
    comparison_results(state)
elif state.error:
    st.warning(state.error)
else:
    comparison_progress()

# 5 ---------------------------------------------------------------------------------------------
st.subheader("5 · When a switch makes a task impossible")
st.markdown(
    "- **Previous token without positions.** The words are random, so the key just before "
    "token i looks like any other key. Without position vectors, x_i depends only on the word, "
    'and no W_q, W_k can point at "the one before". With the causal mask a little order leaks '
    "in (row i sees only i + 1 keys), so the early rows do better than chance.\n"
    "- **First occurrence without positions.** All copies of a word are the same vector, so "
    "the row splits its weight evenly between them: right word, no way to prefer the earliest. "
    "The accuracy counts such a tie as a miss.\n"
    "- **Matching bracket with the causal mask.** An opening bracket's partner always comes "
    "later, and the mask sets every later score to −∞: the openers, half of the tokens, can "
    "put no weight on their target at all. Those are left out of the loss (log 0 is −∞) and "
    "counted as misses, so accuracy cannot pass one half. The closing brackets still learn.\n"
    "- **Matching bracket without positions** works: each kind appears once, so the partner "
    "is found by content alone. Look at W_qᵀW_k: the word→word block pairs ( with ) and [ with ]."
)

# =============================================================================================
# A second experiment: induction heads, learned (core/induction.py, ui/induction_runs.py)
# =============================================================================================
st.divider()
st.header("Second experiment · Induction heads, learned")
induction_defaults = induction.InductionSettings()
st.markdown(
    "The heads above solve a task whose answer is one fixed pattern. An **induction head** "
    "does something more general: when the current word appeared earlier, it looks at the "
    "word that came *after* that earlier occurrence and copies it, so “… Harry Potter … "
    "Harry” gets “Potter” next. Olsson et al. (2022) found such heads forming, in a sudden "
    "change early in training, in the language models of two or more layers they studied. "
    "They offer evidence, which they call preliminary and indirect, for the hypothesis that "
    "such heads might be the mechanism behind most in-context learning in large models. "
    "Here you train a small decoder from random numbers and watch one form."
)
st.markdown(
    f"**The task.** Every sequence has {induction_defaults.n_tokens} words from a vocabulary "
    f"of {induction_defaults.vocab_size}: a few random words, then a random segment, then the "
    "same segment again, then random filler. The segment's length "
    f"({induction_defaults.shortest_segment} to {induction_defaults.longest_segment} words) "
    "and the number of words before it (none to "
    f"{induction_defaults.longest_prefix}) are drawn afresh for every sequence. That is the "
    "point: the distance back to the answer changes every time, so a head that always looks "
    "a fixed number of places back cannot predict the repeat. It has to find the earlier "
    "copy of the current word by what it is, not where it is.\n\n"
    "**The loss** is the next-word cross-entropy on the second copy only. The words before "
    "it are random, and nothing can predict a random word better than an even guess over the "
    "vocabulary: training on them would add noise and no signal. Their loss is still "
    "measured and drawn.\n\n"
    "**The model** is a decoder with attention and nothing else: word and position "
    f"vectors (width {induction_defaults.d_model}), {induction_defaults.n_heads} heads per "
    "layer adding their output to the running vector of each word, and a read-out to the "
    "vocabulary. Elhage et al. (2021) explain why an induction head takes two layers. A "
    "**previous-token head** in layer 0 writes into every word's vector “the word before me "
    "was a”. A head in layer 1 whose query is the current word a then finds, through its "
    "keys, the position marked “the word before me was a”: the word after the earlier a. "
    "Its keys read what the layer-0 head wrote (K-composition). With one layer there is no "
    "earlier head to read from."
)
left, middle, right = st.columns([1, 1, 1])
with left:
    induction_seed = widgets.whole_number_input("Seed of these runs", 0, 9999, 0, key="ind_seed")
induction_seed = min(max(int(induction_seed), 0), 9999)  # the URL may carry any number


def induction_settings(n_layers: int) -> induction.InductionSettings:
    return induction.InductionSettings(n_layers=n_layers, seed=induction_seed)


def train_induction_run(n_layers: int) -> None:
    """Remember which runs to show; the slider opens on the new run's last step."""
    trained = dict(st.session_state.get("ind_trained", {}))
    trained[n_layers] = induction_settings(n_layers)
    st.session_state["ind_trained"] = trained
    if n_layers == 2:
        st.session_state.pop("ind_step", None)


# A copied link carries ind_run=2, 1 or 21 and opens on the same runs (seeded: identical).
if "ind_trained" not in st.session_state:
    linked = str(st.query_params.get("ind_run", ""))[:2]
    for n_layers in (2, 1):
        if str(n_layers) in linked:
            train_induction_run(n_layers)

middle.button(
    "Train (2 layers)",
    type="primary",
    icon=":material/play_arrow:",
    on_click=train_induction_run,
    args=(2,),
    key="ind_train_two",
)
right.button(
    "Train with 1 layer",
    icon=":material/compare_arrows:",
    on_click=train_induction_run,
    args=(1,),
    key="ind_train_one",
)
st.caption(
    f"Training stops once the held-out loss on the repeat is below "
    f"{induction_defaults.solved_loss} nats, or after {induction_defaults.max_steps} steps. "
    "Each step is one Adam update on a fresh batch of "
    f"{induction_defaults.batch_size} sequences, learning rate "
    f"{induction_defaults.learning_rate}.",
    help=terms.ahead("nats"),
)
induction_trained: dict[int, induction.InductionSettings] = {
    n_layers: chosen
    for n_layers, chosen in st.session_state.get("ind_trained", {}).items()
    if chosen == induction_settings(n_layers)
}
if induction_trained:
    st.query_params["ind_run"] = "".join(str(n) for n in sorted(induction_trained, reverse=True))
else:
    st.query_params.pop("ind_run", None)


def two_layer_section(run: induction.InductionRun) -> None:
    st.subheader("Two layers: watch the induction head form")
    columns = st.columns(4)
    columns[0].metric("Steps trained", f"{run.steps}")
    columns[1].metric("Loss on the repeat", f"{run.probe_repeated_loss[-1]:.3f}")  # vs a 0.1 bar
    layer, head, best = run.scores_at(-1).best("induction")
    columns[2].metric(
        f"Best induction score ({induction_charts.head_name(layer, head)})", f"{best:.2f}"
    )
    columns[3].metric("Training time", f"{run.seconds:.1f} s")
    st.markdown(lab_story.two_layer_story(run))
    every = int(run.settings.snapshot_every)
    last = int(run.snapshot_steps[-1])
    step = st.slider("Step", 0, last, last, step=every, key="ind_step", bind="query-params")
    step = min(max(int(step), 0), last)  # the URL may carry any number
    index = run.snapshot_index(step)
    display.show_figure(
        induction_charts.loss_curves(run, step), "ind_loss", filename="induction-loss"
    )
    st.caption(
        "Loss on the training batch before each update, on a log axis. Blue: the repeat, the "
        "only part trained. Purple: the first copy. Red dotted lines: a head's induction "
        "score on the held-out sequences reaches the bar. Green: the step chosen above."
    )
    # one above the other: each has eight heads in its legend and a long title
    display.show_figure(
        induction_charts.score_curves(run, "previous_token", step),
        "ind_previous_curves",
        filename="induction-previous-token",
    )
    display.show_figure(
        induction_charts.score_curves(run, "induction", step),
        "ind_induction_curves",
        filename="induction-scores",
    )
    display.show_matrix(
        run.induction.shape,
        None,
        lambda: induction_charts.score_grid(
            run.scores_at(index), f"Every head's two scores after step {run.snapshot_steps[index]}"
        ),
        "ind_grid",
        filename="induction-grid",
    )
    st.caption(
        "Scores on held-out sequences of the same task, measured as on the Multi-head "
        "attention page: dotted lines and the top row are layer 0, solid lines and the bottom "
        "row layer 1. The framed cell is each grid's best head."
    )


def one_layer_section(one: induction.InductionRun, two: induction.InductionRun | None) -> None:
    st.subheader("One layer: the same run without a layer to read from")
    st.markdown(lab_story.one_layer_story(one, two))
    display.show_figure(
        induction_charts.loss_curves(one), "ind_one_loss", filename="induction-1-layer-loss"
    )
    display.show_matrix(
        one.induction.shape,
        None,
        lambda: induction_charts.score_grid(one.scores_at(-1), "One layer, after the last step"),
        "ind_one_grid",
        filename="induction-1-layer-grid",
    )


if not induction_trained:
    st.info(
        "Press **Train (2 layers)**, then **Train with 1 layer** to compare.",
        icon=":material/play_arrow:",
    )
two_layers = induction_runs.trained_run(induction_trained[2]) if 2 in induction_trained else None
if two_layers is not None:
    two_layer_section(two_layers)
if 1 in induction_trained:
    one_layer_section(induction_runs.trained_run(induction_trained[1]), two_layers)
