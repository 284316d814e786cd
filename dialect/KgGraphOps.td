//===- KgGraphOps.td - kg ops on whole tensors ----------------------------===//
//
// Graph ops: what a user writes. Every op works on ranked tensors with static
// shapes. Elementwise math, reductions and normalizations take f32, f16 or
// bf16; the 8-bit floats are accepted by matmul, cast and the view ops
// (transpose, reshape, broadcast_to, concat, slice).
//
//===----------------------------------------------------------------------===//

#ifndef KG_GRAPH_OPS_TD
#define KG_GRAPH_OPS_TD

include "KgBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

// A unary op whose result has the operand's type. `formula` is shown in the
// summary and description.
class Kg_UnaryOp<string mnemonic, string formula, list<Trait> traits = []>
    : Kg_ElementwiseOp<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every element of `x`. "
    # "The result has the type of `x`. Half-precision inputs are computed "
    # "in f32 and rounded once to the result type.\n\n"
    # "Example:\n\n```mlir\n%y = kg." # mnemonic
    # " %x : tensor<16x128xf16>\n```";
  let arguments = (ins Kg_FloatTensor:$x);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

// A unary op on floats and integers alike. Integer results wrap around as
// torch's do (the negation of the most negative value is itself).
class Kg_NumericUnaryOp<string mnemonic, string formula>
    : Kg_ElementwiseOp<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every element of `x`, "
    # "a tensor of floats or of integers. The result has the type of `x`. "
    # "Half-precision inputs are computed in f32 and rounded once; integers "
    # "are computed in their own type and wrap around.\n\n"
    # "Example:\n\n```mlir\n%y = kg." # mnemonic
    # " %x : tensor<16x128xf16>\n%p = kg." # mnemonic
    # " %i : tensor<128xi32>\n```";
  let arguments = (ins Kg_NumericTensor:$x);
  let results = (outs Kg_NumericTensor:$out);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Kg_ExpOp : Kg_UnaryOp<"exp", "exp(x)">;
def Kg_LogOp : Kg_UnaryOp<"log", "log(x)">;
def Kg_SqrtOp : Kg_UnaryOp<"sqrt", "sqrt(x)">;
def Kg_RsqrtOp : Kg_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Kg_NegOp : Kg_NumericUnaryOp<"neg", "-x">;
def Kg_AbsOp : Kg_NumericUnaryOp<"abs", "|x|">;
def Kg_ReluOp : Kg_UnaryOp<"relu", "max(x, 0)">;
def Kg_SiluOp : Kg_UnaryOp<"silu", "x * sigmoid(x)">;
def Kg_SigmoidOp : Kg_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Kg_TanhOp : Kg_UnaryOp<"tanh", "tanh(x)">;
def Kg_SinOp : Kg_UnaryOp<"sin", "sin(x)">;
def Kg_CosOp : Kg_UnaryOp<"cos", "cos(x)">;
def Kg_SquareOp : Kg_UnaryOp<"square", "x * x">;
def Kg_ReciprocalOp : Kg_UnaryOp<"reciprocal", "1 / x">;

def Kg_LogicalNotOp : Kg_ElementwiseOp<"logical_not", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise boolean negation";
  let description = [{
    Computes `!x` for every element of the boolean (i1) tensor `x`, as
    `torch.logical_not` does on a bool tensor. The result has the type of
    `x`; other element types are refused (compare them first).

    Example:

    ```mlir
    %n = kg.logical_not %mask : tensor<16x128xi1>
    ```
  }];
  let arguments = (ins Kg_BoolTensor:$x);
  let results = (outs Kg_BoolTensor:$out);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Kg_GeluOp : Kg_ElementwiseOp<"gelu", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise Gaussian error linear unit";
  let description = [{
    Computes `x * Phi(x)` for every element, where `Phi` is the standard
    normal CDF. `approximate = none` (the default) uses the exact CDF,
    `0.5 * (1 + erf(x / sqrt(2)))`; `approximate = tanh` uses
    `0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`, as
    `torch.nn.functional.gelu(x, approximate="tanh")` does.

    Example:

    ```mlir
    %y = kg.gelu %x : tensor<16x128xf32>
    %z = kg.gelu %x approximate = tanh : tensor<16x128xbf16>
    ```
  }];
  let arguments = (ins Kg_FloatTensor:$x,
      DefaultValuedAttr<Kg_GeluApproximation,
                        "::kgc::kg::GeluApproximation::none">:$approximate);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat =
      "$x (`approximate` `=` $approximate^)? attr-dict `:` type($x)";
}

def Kg_ClampOp : Kg_ElementwiseOp<"clamp", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise clamp to [min, max]";
  let description = [{
    Clamps every element of `x` to `[min, max]`. Either bound may be left
    out, not both; when both are given `min <= max` must hold.

    Example:

    ```mlir
    %y = kg.clamp %x min -1.0 max 1.0 : tensor<16x128xf32>
    %z = kg.clamp %x min 0.0 : tensor<16x128xf16>
    ```
  }];
  let arguments = (ins Kg_FloatTensor:$x, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat =
      "$x (`min` $min^)? (`max` $max^)? attr-dict `:` type($x)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

// Binary ops broadcast their operands as numpy does: shapes are aligned at
// the trailing dimension and a dimension of 1 stretches to the other size.
// `Tensor` is the constraint of the operands and the result: floats for
// the math ops, floats and integers for the arithmetic that positions and
// indices need, i1 for the logical ops.
class Kg_BinaryOp<string mnemonic, string formula, list<Trait> traits = [],
                  TypeConstraint Tensor = Kg_FloatTensor,
                  string types = "f32, f16 or bf16", string example = "f32">
    : Kg_ElementwiseOp<mnemonic, !listconcat(traits, [Pure])> {
  let summary = "elementwise " # formula # " with broadcasting";
  let description = "Computes `" # formula # "` elementwise after "
    # "broadcasting `lhs` and `rhs` to a common shape as numpy does "
    # "(trailing dimensions aligned, a dimension of 1 stretches). Both "
    # "operands and the result share one element type ("
    # types # "); the result has the broadcast shape. Integers "
    # "are computed in their own type and wrap around.\n\n"
    # "Example:\n\n```mlir\n%y = kg." # mnemonic
    # " %a, %b : (tensor<16x128x" # example # ">, tensor<128x" # example
    # ">) -> tensor<16x128x" # example # ">\n```";
  let arguments = (ins Tensor:$lhs, Tensor:$rhs);
  let results = (outs Tensor:$out);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kg_AddOp : Kg_BinaryOp<"add", "lhs + rhs", [Commutative], Kg_NumericTensor,
                           "f32, f16, bf16, i32 or i64">;
def Kg_SubOp : Kg_BinaryOp<"sub", "lhs - rhs", [], Kg_NumericTensor,
                           "f32, f16, bf16, i32 or i64">;
def Kg_MulOp : Kg_BinaryOp<"mul", "lhs * rhs", [Commutative], Kg_NumericTensor,
                           "f32, f16, bf16, i32 or i64">;
def Kg_DivOp : Kg_BinaryOp<"div", "lhs / rhs">;
def Kg_MaximumOp : Kg_BinaryOp<"maximum", "max(lhs, rhs)", [Commutative],
                               Kg_NumericTensor, "f32, f16, bf16, i32 or i64">;
def Kg_MinimumOp : Kg_BinaryOp<"minimum", "min(lhs, rhs)", [Commutative],
                               Kg_NumericTensor, "f32, f16, bf16, i32 or i64">;
def Kg_PowOp : Kg_BinaryOp<"pow", "lhs ^ rhs">;
def Kg_LogicalAndOp : Kg_BinaryOp<"logical_and", "lhs && rhs", [Commutative],
                                  Kg_BoolTensor, "i1", "i1">;
def Kg_LogicalOrOp : Kg_BinaryOp<"logical_or", "lhs || rhs", [Commutative],
                                 Kg_BoolTensor, "i1", "i1">;
def Kg_LogicalXorOp : Kg_BinaryOp<"logical_xor", "lhs != rhs", [Commutative],
                                  Kg_BoolTensor, "i1", "i1">;

//===----------------------------------------------------------------------===//
// Comparisons and selects
//===----------------------------------------------------------------------===//

def Kg_CmpOp : Kg_ElementwiseOp<"cmp", [Pure]> {
  let summary = "elementwise comparison with broadcasting, giving i1";
  let description = [{
    Compares `lhs` and `rhs` elementwise with `predicate` (`eq`, `ne`,
    `lt`, `le`, `gt`, `ge`) after broadcasting them as the binary ops do,
    as `torch.eq`, `torch.lt`, ... do. The operands share an element type
    (f32, f16, bf16, i1, i32 or i64); the result is a tensor of i1 of the
    broadcast shape. Floats compare as IEEE values: a NaN is unequal to
    everything, so `ne` holds and every other predicate fails. Integers
    compare as signed values, i1 as `false < true`.

    Example:

    ```mlir
    %m = kg.cmp ge %rows, %cols : (tensor<128x1xi32>, tensor<1x128xi32>) -> tensor<128x128xi1>
    %p = kg.cmp lt %x, %zero : (tensor<16x128xf16>, tensor<f16>) -> tensor<16x128xi1>
    ```
  }];
  let arguments = (ins Kg_ValueTensor:$lhs, Kg_ValueTensor:$rhs,
                       Kg_ComparePredicate:$predicate);
  let results = (outs Kg_BoolTensor:$out);
  let assemblyFormat = "$predicate $lhs `,` $rhs attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kg_SelectOp : Kg_ElementwiseOp<"select", [Pure]> {
  let summary = "elementwise choice between two tensors by a boolean tensor";
  let description = [{
    Element `i` of the result is `true_value[i]` where `cond[i]` holds and
    `false_value[i]` elsewhere, after broadcasting the three operands to a
    common shape as numpy does: `torch.where(cond, true_value,
    false_value)`. `cond` is a tensor of i1; the two values share an
    element type (f32, f16, bf16, i1, i32 or i64), which the result has.
    A causal mask is a select of a score and -inf by a comparison of two
    iotas.

    Example:

    ```mlir
    %y = kg.select %mask, %scores, %ninf : (tensor<128x128xi1>, tensor<128x128xf32>, tensor<f32>) -> tensor<128x128xf32>
    ```
  }];
  let arguments = (ins Kg_BoolTensor:$cond, Kg_ValueTensor:$true_value,
                       Kg_ValueTensor:$false_value);
  let results = (outs Kg_ValueTensor:$out);
  let assemblyFormat = "$cond `,` $true_value `,` $false_value attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kg_IotaOp : Kg_Op<"iota", [Pure]> {
  let summary = "a tensor whose elements count along one dimension";
  let description = [{
    Element `i` of the result holds `start + i[dim]`: the positions along
    dimension `dim` (in `[0, rank)`), the same in every other dimension,
    as `torch.arange(start, start + n)` broadcast along the others does.
    The element type is an integer (i32, i64) or a float (f32, f16, bf16;
    the count is rounded to it once, as a cast would). `start` defaults
    to 0. Every value from `start` to `start + n - 1` must fit i32, or for
    an i64 result lie within 2^53 (the start is held exactly by an f64).

    Example:

    ```mlir
    %rows = kg.iota dim 0 : tensor<128x1xi32>
    %pos = kg.iota dim 1 start 64 : tensor<4x256xi64>
    ```
  }];
  let arguments = (ins I64Attr:$dim, DefaultValuedAttr<I64Attr, "0">:$start);
  let results = (outs Kg_StaticNumericTensor:$out);
  let assemblyFormat = "`dim` $dim (`start` $start^)? attr-dict `:` type($out)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Constants and casts
//===----------------------------------------------------------------------===//

def Kg_ConstantOp : Kg_Op<"constant", [Pure]> {
  let summary = "a tensor whose elements all hold one value";
  let description = [{
    Produces a tensor of the result type with every element equal to
    `value`. A rank-0 tensor is a scalar that binary ops broadcast.
    For a float type the value must be finite in the type unless it is an
    infinity itself; for an integer type (i32, i64) it must be a whole
    number in the type's range (exactly held by an f64: within 2^53), and
    for i1 it is 0 (false) or 1 (true).

    Example:

    ```mlir
    %eps = kg.constant 1.0e-06 : tensor<f32>
    %ones = kg.constant 1.0 : tensor<16x128xf16>
    %seven = kg.constant 7.0 : tensor<i32>
    %yes = kg.constant 1.0 : tensor<i1>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Kg_StaticValueTensor:$out);
  let assemblyFormat = "$value attr-dict `:` type($out)";
  let hasVerifier = 1;
}

def Kg_CastOp : Kg_ElementwiseOp<"cast", [Pure]> {
  let summary = "element type conversion";
  let description = [{
    Converts every element of `x` to the result's element type, as torch's
    `Tensor.to(dtype)` does. The shape does not change. Between floats and
    from integers to floats it rounds to nearest even; from floats to
    integers it truncates toward zero; from i1, false is 0 and true is 1;
    to i1, a value is true when it is not zero; between integers it
    sign-extends or keeps the low bits. Values beyond the finite range of
    an 8-bit result type, and floats (NaN included) outside the range of
    an integer result type, are outside the contract: Triton saturates
    them where torch gives NaN or an unspecified value.

    Example:

    ```mlir
    %h = kg.cast %x : tensor<16x128xf32> to tensor<16x128xf16>
    %f = kg.cast %mask : tensor<16x128xi1> to tensor<16x128xf32>
    %i = kg.cast %pos : tensor<128xi32> to tensor<128xi64>
    ```
  }];
  let arguments = (ins Kg_Tensor:$x);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($out)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

def Kg_MatmulOp : Kg_Op<"matmul", [Pure]> {
  let summary = "matrix product, 2-D or batched, with f32 accumulation";
  let description = [{
    Computes `a @ b` as `torch.matmul` does for operands of rank 2 or more:
    the last two dimensions of `a` are `M x K`, of `b` are `K x N`; the
    leading (batch) dimensions broadcast against each other. Products are
    accumulated in f32 and rounded once to the result element type, which
    is f32, f16 or bf16.

    Operands share an element type, except that the two 8-bit floats mix.
    For f32 operands `precision` picks `ieee` (the default, exact f32) or
    `tf32` (tensor cores, 10-bit mantissa). 8-bit float operands may set
    `fast_accum`: the tensor cores then sum the products of the whole k
    loop themselves, where by default each k step's sum is added into the
    f32 accumulator after it (see `Kg_Precision`). f16 and bf16 operands
    may not set a precision.

    Example:

    ```mlir
    %c = kg.matmul %a, %b : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16>
    %d = kg.matmul %x, %y precision = tf32 : (tensor<8x64x32xf32>, tensor<32x16xf32>) -> tensor<8x64x16xf32>
    %e = kg.matmul %p, %q precision = fast_accum : (tensor<256x512xf8E4M3FN>, tensor<512x128xf8E4M3FN>) -> tensor<256x128xf32>
    ```
  }];
  let arguments = (ins Kg_Tensor:$a, Kg_Tensor:$b,
                       OptionalAttr<Kg_Precision>:$precision);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat = "$a `,` $b (`precision` `=` $precision^)? attr-dict "
                       "`:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

def Kg_ReduceOp : Kg_Op<"reduce", [Pure]> {
  let summary = "sum, max, min or mean over one or more dimensions";
  let description = [{
    Reduces `x` over the dimensions `dims` (distinct, each in `[0, rank)`)
    with the combiner `kind`. With `keepdim` the reduced dimensions stay as
    size 1; without it they are dropped. Sums and means accumulate in f32.

    Example:

    ```mlir
    %s = kg.reduce sum %x dims [1] : tensor<16x128xf32> -> tensor<16xf32>
    %m = kg.reduce max %x dims [0, 2] keepdim : tensor<4x16x128xf16> -> tensor<1x16x1xf16>
    ```
  }];
  let arguments = (ins Kg_ReduceKind:$kind, Kg_FloatTensor:$x,
                       DenseI64ArrayAttr:$dims, UnitAttr:$keepdim);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat = "$kind $x `dims` $dims (`keepdim` $keepdim^)? "
                       "attr-dict `:` type($x) `->` type($out)";
  let hasVerifier = 1;
}

def Kg_SoftmaxOp : Kg_Op<"softmax", [Pure, InferTypeOpAdaptor]> {
  let summary = "softmax along one dimension";
  let description = [{
    Computes `exp(x - max(x)) / sum(exp(x - max(x)))` along dimension `dim`,
    which lies in `[0, rank)`. The result has the type of `x`.

    Example:

    ```mlir
    %p = kg.softmax %s dim 1 : tensor<16x1000xf16>
    ```
  }];
  let arguments = (ins Kg_FloatTensor:$x, I64Attr:$dim);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat = "$x `dim` $dim attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Kg_RmsNormOp : Kg_Op<"rms_norm", [Pure]> {
  let summary = "root-mean-square normalization over the trailing dimensions";
  let description = [{
    Computes `x / sqrt(mean(x^2) + eps) * weight`, the mean taken over the
    trailing dimensions named by `normalized_shape` (which must equal the
    trailing dimensions of `x`), as `torch.nn.functional.rms_norm` does.
    `weight`, when present, has shape `normalized_shape` and the element
    type of `x`. `eps` is positive.

    Example:

    ```mlir
    %y = kg.rms_norm %x weight %w normalized_shape [4096] eps 1.0e-06 : (tensor<16x4096xf16>, tensor<4096xf16>) -> tensor<16x4096xf16>
    ```
  }];
  let arguments = (ins Kg_FloatTensor:$x, Optional<Kg_FloatTensor>:$weight,
                       DenseI64ArrayAttr:$normalized_shape, F64Attr:$eps);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat = "$x (`weight` $weight^)? `normalized_shape` "
                       "$normalized_shape `eps` $eps attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kg_LayerNormOp : Kg_Op<"layer_norm", [Pure, AttrSizedOperandSegments]> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Computes `(x - mean(x)) / sqrt(var(x) + eps) * weight + bias` with the
    biased variance, over the trailing dimensions named by
    `normalized_shape`, as `torch.nn.functional.layer_norm` does. `weight`
    and `bias` are optional; each has shape `normalized_shape` and the
    element type of `x`. `eps` is positive.

    Example:

    ```mlir
    %y = kg.layer_norm %x weight %w bias %b normalized_shape [768] eps 1.0e-05 : (tensor<32x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) -> tensor<32x768xbf16>
    ```
  }];
  let arguments = (ins Kg_FloatTensor:$x, Optional<Kg_FloatTensor>:$weight,
                       Optional<Kg_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$normalized_shape, F64Attr:$eps);
  let results = (outs Kg_FloatTensor:$out);
  let assemblyFormat = "$x (`weight` $weight^)? (`bias` $bias^)? "
                       "`normalized_shape` $normalized_shape `eps` $eps "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// View ops
//===----------------------------------------------------------------------===//

def Kg_TransposeOp : Kg_Op<"transpose", [Pure]> {
  let summary = "permutes the dimensions of a tensor";
  let description = [{
    Result dimension `i` is dimension `permutation[i]` of `x`, as
    `torch.permute` does. `permutation` is a permutation of `[0, rank)`.

    Example:

    ```mlir
    %t = kg.transpose %x [1, 0] : tensor<16x128xf16> -> tensor<128x16xf16>
    ```
  }];
  let arguments = (ins Kg_Tensor:$x, DenseI64ArrayAttr:$permutation);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat =
      "$x $permutation attr-dict `:` type($x) `->` type($out)";
  let hasVerifier = 1;
}

def Kg_ReshapeOp : Kg_Op<"reshape", [Pure]> {
  let summary = "reinterprets the elements of a tensor in another shape";
  let description = [{
    Keeps the elements in row-major order and gives them the result shape,
    which holds as many elements as `x`.

    Example:

    ```mlir
    %r = kg.reshape %x : tensor<16x8x16xf32> -> tensor<16x128xf32>
    ```
  }];
  let arguments = (ins Kg_Tensor:$x);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($out)";
  let hasVerifier = 1;
}

def Kg_BroadcastToOp : Kg_Op<"broadcast_to", [Pure]> {
  let summary = "broadcasts a tensor to a larger shape";
  let description = [{
    Stretches `x` to the result shape with numpy's rules: the shapes are
    aligned at the trailing dimension, each dimension of `x` is 1 or equal
    to the result's, and the result may add leading dimensions.

    Example:

    ```mlir
    %b = kg.broadcast_to %bias : tensor<128xf32> -> tensor<16x128xf32>
    ```
  }];
  let arguments = (ins Kg_Tensor:$x);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($out)";
  let hasVerifier = 1;
}

def Kg_ConcatOp : Kg_Op<"concat", [Pure]> {
  let summary = "joins tensors along one dimension";
  let description = [{
    Concatenates `inputs` (at least one) along `dim`. The inputs share rank,
    element type and every dimension but `dim`; the result's `dim` is the sum
    of theirs.

    Example:

    ```mlir
    %c = kg.concat %a, %b dim 1 : (tensor<16x64xf16>, tensor<16x32xf16>) -> tensor<16x96xf16>
    ```
  }];
  let arguments = (ins Variadic<Kg_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat = "$inputs `dim` $dim attr-dict `:` "
                       "functional-type($inputs, results)";
  let hasVerifier = 1;
}

def Kg_SliceOp : Kg_Op<"slice", [Pure]> {
  let summary = "a strided window of a tensor";
  let description = [{
    Result element `i` is `x[offsets + i * strides]`, per dimension, as the
    Python slice `x[o : o + n * s : s]` gives. `offsets` are non-negative,
    `strides` positive, and every selected index lies inside `x`. The
    result type gives the number of elements taken per dimension.

    Example:

    ```mlir
    %s = kg.slice %x offsets [0, 64] strides [1, 2] : tensor<16x128xf32> -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins Kg_Tensor:$x, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat = "$x `offsets` $offsets `strides` $strides attr-dict "
                       "`:` type($x) `->` type($out)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Indexed ops
//===----------------------------------------------------------------------===//

def Kg_GatherOp : Kg_Op<"gather", [Pure]> {
  let summary = "the slices of a table that an index tensor names";
  let description = [{
    Takes, along dimension `dim` of `table`, the slices whose positions
    `indices` lists, in that order, as `torch.index_select(table, dim,
    indices)` does: element `r` of the result is `table[r']`, where `r'` is
    `r` with its coordinate `i` along `dim` replaced by `indices[i]`. An
    embedding lookup is a gather of the rows (dim 0) of the embedding
    table. `indices` is a 1-D tensor of i32 or i64 (any number of entries,
    repeats allowed); the result has the shape of `table` with dimension
    `dim` replaced by the number of indices, and the element type of
    `table`.

    Every index must lie in `[0, table.shape[dim])`: negative indices do
    not count from the end. An index outside is an error that
    `kgc.reference` and the CPU executor report (naming the op, the index
    and where it sits); a GPU kernel does not check it.

    Example:

    ```mlir
    %rows = kg.gather %embedding[%ids] dim 0 : (tensor<2048x512xf16>, tensor<16xi64>) -> tensor<16x512xf16>
    %cols = kg.gather %x[%picked] dim 1 : (tensor<4x1000xf32>, tensor<3xi32>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Kg_Tensor:$table, Kg_IndexTensor:$indices, I64Attr:$dim);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat = "$table `[` $indices `]` `dim` $dim attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kg_ScatterOp : Kg_Op<"scatter", [Pure]> {
  let summary = "a copy of a tensor with slices written or added at listed positions";
  let description = [{
    The result is `dest` with, for each `i`, the slice of `source` at
    position `i` along dimension `dim` written (`assign`) or added (`add`)
    at position `indices[i]` along `dim` of `dest`: `assign` is
    `dest.index_copy(dim, indices, source)` (a static KV cache update at
    the cache positions), `add` is `dest.index_add(dim, indices, source)`
    (the gradient of an embedding lookup, where a token that occurs twice
    gets both rows of the gradient). `dest` is not changed: the op makes a
    new tensor.

    `indices` is a 1-D tensor of i32 or i64; `source` has the shape of
    `dest` with dimension `dim` replaced by the number of indices, and the
    element type of `dest`; the result has the type of `dest`. `add` takes
    floats and integers (not i1); an `add` of f16 or bf16 sums each
    position's contributions in f32 and rounds once. Where an index repeats
    under `assign`, one of the slices written there is kept, and which one
    is unspecified (torch's rule; kgc's reference keeps the last). Every
    index must lie in `[0, dest.shape[dim])`: `kgc.reference` reports one
    outside (naming the op, the index and where it sits); the kernels kgc
    makes of a scatter (`kg-decompose`) write or add nothing for it, on the
    GPU and on the CPU executor alike.

    Example:

    ```mlir
    %cache1 = kg.scatter assign %cache[%positions], %k dim 2 : (tensor<1x4x512x64xf16>, tensor<1xi64>, tensor<1x4x1x64xf16>) -> tensor<1x4x512x64xf16>
    %grad = kg.scatter add %zeros[%ids], %grad_rows dim 0 : (tensor<2048x512xf32>, tensor<16xi64>, tensor<16x512xf32>) -> tensor<2048x512xf32>
    ```
  }];
  let arguments = (ins Kg_ScatterMode:$mode, Kg_Tensor:$dest,
                       Kg_IndexTensor:$indices, Kg_Tensor:$source, I64Attr:$dim);
  let results = (outs Kg_Tensor:$out);
  let assemblyFormat = "$mode $dest `[` $indices `]` `,` $source `dim` $dim attr-dict "
                       "`:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

def Kg_KernelOp : Kg_Op<"kernel", [IsolatedFromAbove, SingleBlock,
                                    RecursiveMemoryEffects]> {
  let summary = "a region of graph ops that becomes one GPU kernel";
  let description = [{
    Takes tensors and produces tensors, like the ops it holds; kgc turns
    each kernel into one Triton kernel. The body has one of two forms.

    Graph form (after `kg-fuse`): the block takes one tensor per input,
    typed as the input, and ends in `kg.yield` of one tensor per result.

    Tiled form (after `kg-tile`): the block takes one memref per input and
    then one per result, each with the shape and element type of its
    tensor; the body is a tile program that reads the inputs and writes
    the results through tile ops, one program per grid point, and ends in
    an empty `kg.yield`. The launch configuration is kept as attributes:
    `grid` (three program counts) and `config` (every knob it was made
    with: warps, stages, tile sizes).

    Knobs (kgc.tiling.config): the `config` attribute, a dictionary of a
    kernel's knobs, each an integer or a flag (true or false). A user or a
    tuner may set some before `kg-tile`, which keeps them and fills in the
    others; after it they are the kernel's whole config. The dialect checks
    the dictionary's form: names are identifiers (a letter or `_`, then
    letters, digits, `_`), values booleans or positive integers. Which knobs
    a kernel has, and which values suit its extents, its schedule says
    (`kg-tile` checks them): the built-in ones take tile sizes `block_m`,
    `block_n`, `block_k`, `group_m` (matmul), `block_x`, `block_r`
    (reductions), `num_warps`, `num_stages`, `num_programs` (persistent
    programs), `split_k`, `warp_specialize`, `flatten`, `tma` (matmul),
    `split_kv` and `pack_heads` (attention); a schedule registered from
    outside kgc brings its own.

    ```mlir
    %c = kg.kernel @mm(%a, %b) attributes {config = {block_m = 64, block_n = 128, num_warps = 4, tma = true}}
        : (tensor<512x256xf16>, tensor<256x1024xf16>) -> tensor<512x1024xf16> {
    ^bb0(%x: tensor<512x256xf16>, %w: tensor<256x1024xf16>):
      %p = kg.matmul %x, %w : (tensor<512x256xf16>, tensor<256x1024xf16>) -> tensor<512x1024xf16>
      kg.yield %p : tensor<512x1024xf16>
    }
    ```

    Example:

    ```mlir
    %y = kg.kernel @add_relu(%a, %b) : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32> {
    ^bb0(%x: tensor<16x128xf32>, %bias: tensor<128xf32>):
      %s = kg.add %x, %bias : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
      %r = kg.relu %s : tensor<16x128xf32>
      kg.yield %r : tensor<16x128xf32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Variadic<Kg_Tensor>:$inputs,
                       OptionalAttr<DictionaryAttr>:$config);
  let results = (outs Variadic<Kg_Tensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `(` $inputs `)` attr-dict-with-keyword `:` "
                       "functional-type($inputs, results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True when the body is a tile program (memref block arguments).
    bool isTiled();
  }];
}

def Kg_YieldOp : Kg_Op<"yield", [Pure, Terminator, ReturnLike,
                                  HasParent<"KernelOp">]> {
  let summary = "ends a kernel body";
  let description = [{
    In graph form, returns the kernel's result tensors; in tiled form it
    takes no operands (the results were stored into the output buffers).

    Example:

    ```mlir
    kg.yield %r : tensor<16x128xf32>
    ```
  }];
  let arguments = (ins Variadic<Kg_Tensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // KG_GRAPH_OPS_TD
