"""Lab · Attention, learned: train one head from scratch on a task whose answer is a pattern."""

import streamlit as st

from core import lab
from ui import lab_charts, lab_runs, widgets

st.title("Lab · Watch attention being learned")
st.markdown(
    "Every other page shows attention that someone else trained. Here you train a head "
    "yourself, from random numbers, in a second or two. Each task below has a right answer that "
    "*is* an attention pattern: every token should put its weight on one particular other token. "
    "Press **Train**, then move the step slider to watch the pattern, the loss and the head's "
    "weights take shape."
)

# 1 ---------------------------------------------------------------------------------------------
st.subheader("1 · The task and the model")
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
task_name = st.selectbox(
    "Task",
    list(lab.TASKS),
    format_func=lambda name: lab.TASKS[name].title,
    key="lab_task",
    bind="query-params",
)
task = lab.TASKS[task_name]
st.markdown(TASK_HELP[task_name])
# One formula per line: a 390 px phone cannot scroll a long one sideways comfortably.
st.latex(r"x_i = E_{\text{tok}}[w_i] + E_{\text{pos}}[i]")
st.latex(r"s_{ij} = \frac{(W_q x_i)\cdot(W_k x_j)}{\sqrt{d_{\text{head}}}}")
st.latex(r"\alpha_i = \operatorname{softmax}(s_{i1}, \dots, s_{in})")
st.markdown(
    f"One head: a table of {len(task.vocabulary)} word vectors and one of {task.n_tokens} "
    f"position vectors (width {lab.D_MODEL}), and the two matrices W_q and W_k. Nothing else: "
    "the row of weights α_i *is* the prediction, so attention alone has to solve the task. "
    "(A full layer would read the answer out through the values; leaving them out keeps any "
    "other path from cheating.) Adam updates the parameters on a fresh batch of "
    f"{lab.Settings.batch_size} random sequences per step. The loss compares each row with the "
    "one-hot row y_i of its target key t(i):"
)
st.latex(r"L_{\text{squared}} = \frac{1}{n}\sum_i \sum_j (\alpha_{ij} - y_{ij})^2")
st.latex(r"L_{\text{cross-entropy}} = -\frac{1}{n}\sum_i \log \alpha_{i,\,t(i)}")

# 2 ---------------------------------------------------------------------------------------------
st.subheader("2 · Switches")
left, middle, right = st.columns(3)
d_head = left.select_slider(
    "d_head (width of queries and keys)",
    [2, 4, 8, 16, 32, 64, 128],
    value=8,
    key="lab_d_head",
    bind="query-params",
)
steps = middle.select_slider(
    "Training steps", [100, 200, 300, 500], value=300, key="lab_steps", bind="query-params"
)
with right:
    seed = widgets.whole_number_input("Seed", 0, 9999, 0, key="lab_seed")
left, middle, right = st.columns(3)
scale = left.toggle("Divide by √d_head", value=True, key="lab_scale", bind="query-params")
causal = middle.toggle("Causal mask", value=False, key="lab_causal", bind="query-params")
positions = right.toggle("Position vectors", value=True, key="lab_positions", bind="query-params")
loss_name = st.radio(
    "Loss",
    ["squared", "cross_entropy"],
    format_func={"squared": "squared error", "cross_entropy": "cross-entropy"}.get,
    horizontal=True,
    key="lab_loss",
    bind="query-params",
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
)

# A copied link of a trained view carries lab_run=1 and opens on the same run: train it
# (seeded, so identical). The URL is visitor input, but a run is bounded by the clamped settings.
if "lab_trained" not in st.session_state and st.query_params.get("lab_run") == "1":
    st.session_state["lab_trained"] = settings


def start_training(chosen: lab.Settings) -> None:
    """Remember what to show; forget the old step, so the slider opens on the run's last step
    (a step kept from a longer run would point past the end)."""
    st.session_state["lab_trained"] = chosen
    st.session_state.pop("lab_step", None)


st.button(
    "Train",
    type="primary",
    icon=":material/play_arrow:",
    on_click=start_training,
    args=(settings,),
)

if st.session_state.get("lab_trained") != settings:
    st.query_params.pop("lab_run", None)
    st.info("Choose the switches, then press **Train**.", icon=":material/play_arrow:")
    st.stop()
st.query_params["lab_run"] = "1"  # the address now reopens this run

run = lab_runs.trained_run(settings)

# 3 ---------------------------------------------------------------------------------------------
st.subheader("3 · Watch it learn")
columns = st.columns(4)
columns[0].metric("Weight on the right key", f"{run.eval_mass[-1]:.3f}")
columns[1].metric("Accuracy", f"{run.eval_accuracy[-1]:.1%}")
columns[2].metric("Score spread at step 0", f"{run.initial_score_std:.1f}")
columns[3].metric("Training time", f"{run.seconds:.2f} s")
st.caption(
    f"After {settings.steps} steps, on {lab.N_EVAL_SEQUENCES} held-out sequences: the mean "
    "weight each token puts on its target key, and the share of tokens whose largest weight is "
    "on it (a tie does not count). The spread is the standard deviation of the scores before "
    "training."
    + (
        f" The causal mask hides the target of {1 - run.reachable_share:.0%} of the tokens."
        if run.reachable_share < 1
        else ""
    )
)
every = int(run.snapshot_steps[1] - run.snapshot_steps[0])
step = st.slider(
    "Step", 0, settings.steps, settings.steps, step=every, key="lab_step", bind="query-params"
)
index = run.snapshot_index(int(step))
widgets.show_figure(lab_charts.loss_curve(run, index), "lab_loss_curve", filename="lab-loss")
left, right = st.columns(2)
with left:
    widgets.show_figure(
        lab_charts.probe_attention(run, index), "lab_attention", filename="lab-attention"
    )
with right:
    widgets.show_figure(lab_charts.target_attention(run), "lab_target", filename="lab-target")
st.markdown(
    "Left: the weights of the probe sequence after the chosen step. Right: the answer. At "
    "step 0 the weights come from random vectors: spread over several keys in a scaled head, "
    "often one bright cell per row on a wrong key in a wide unscaled one. Training pulls each "
    "row's weight onto its target."
)
st.latex(r"s_{ij} = x_i^{\top}\, W_q^{\top} W_k\, x_j")
widgets.show_figure(lab_charts.bilinear_heatmap(run, index), "lab_bilinear", filename="lab-wqwk")
st.markdown(
    "A score is a bilinear form: the matrix W_qᵀW_k says how much each query direction likes "
    "each key direction. Because x_i is a word vector plus a position vector, every score is a "
    "sum of four entries of this map: word→word, word→position, position→word and "
    "position→position (p0, p1, … are the position vectors). Blue: the query row pulls weight "
    "towards the key row; red: away."
)

# 4 ---------------------------------------------------------------------------------------------
st.subheader("4 · Why divide by √d_head: the training-time argument")
st.markdown(
    "Vaswani et al. (2017) scale scores by 1/√d_k because, at large d_k, dot products grow "
    "large and push the softmax into regions where its gradient is tiny. That is a claim about "
    "*training*, and here you can test it: a wide head (d_head 128) starts with score spreads "
    "around 23 unscaled against about 2 scaled, so most rows begin almost one-hot, often on a "
    "wrong key. What we measured here (10 seeds per cell, 300 steps, positions on, no mask; "
    "`python bench/bench_lab.py --scaling` repeats it):"
)
st.dataframe(
    {
        "loss, head": [
            "squared, d_head 8, scaled",
            "squared, d_head 8, unscaled",
            "squared, d_head 128, scaled",
            "squared, d_head 128, unscaled",
            "cross-entropy, d_head 128, scaled",
            "cross-entropy, d_head 128, unscaled",
        ],
        "previous": ["10/10", "10/10", "10/10", "6/10 (0.945)", "10/10", "10/10"],
        "first": ["10/10", "10/10", "8/10 (0.994)", "0/10 (0.725)", "10/10", "10/10"],
        "bracket": ["10/10", "10/10", "10/10", "9/10 (0.997)", "10/10", "10/10"],
    },
    hide_index=True,
)
st.caption(
    "Runs solved (accuracy ≥ 99 % on held-out sequences); in brackets the mean weight on the "
    "right key over all ten runs when some were not solved. At d_head 8 every run was solved "
    "either way. Even scaled, two wide first-occurrence runs still had a few rows wrong after "
    "300 steps (accuracy 96.5 % and 98.0 %)."
)
st.markdown(
    "With the squared error, the unscaled wide head does not just learn slower: some of its "
    "rows stay stuck on a wrong key. Two failed previous-token runs that we followed ended with "
    "exactly 0.9 of the weight on the right key, one position of ten pointing elsewhere, after "
    "300 steps and again after 1000. First-occurrence runs (seeds 0–4) even got worse with "
    "more steps: mean weight 0.75 after 300, 0.48 after 1000, as more rows locked onto a wrong "
    "key. A locked row's softmax is saturated, its slope is nearly zero, and the squared error, "
    "like the loss of a real layer that reaches α only through the values it mixes, has to "
    "pass through that slope. With **cross-entropy** every run was solved, scaled or not: the "
    "log undoes the softmax's exponential, so the gradient on the scores, α − y, stays large "
    "however saturated the row is. The argument is about the slope of the softmax that the "
    "gradient has to pass through, not about the size of the scores as such."
)

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
    "later, and the mask sets every later score to −∞: half of the tokens can put no weight "
    "on their target at all. Those are left out of the loss (log 0 is −∞) and counted as "
    "misses, so accuracy stops at 50 %. The closing brackets still learn.\n"
    "- **Matching bracket without positions** works: each kind appears once, so the partner "
    "is found by content alone. Look at W_qᵀW_k: the word→word block pairs ( with ) and [ with ]."
)
