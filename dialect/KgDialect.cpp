//===- KgDialect.cpp - the kg dialect and its verifiers -------------------===//
//
// Every verifier message names the operand, its type (shape and element
// type) and the rule that failed, so that a user can fix the input file
// from the message alone.
//
//===----------------------------------------------------------------------===//

#include "KgDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace kgc::kg;

#include "KgEnums.cpp.inc"

#include "KgDialect.cpp.inc"

void KgDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "KgOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

namespace {

/// An extent as text: its number, or `?` when it is dynamic.
std::string dimText(int64_t dim) {
  return ShapedType::isDynamic(dim) ? std::string("?") : std::to_string(dim);
}

/// A shape as text, `[16, 128]` or `[?, 128]`, for diagnostics.
std::string shapeText(ArrayRef<int64_t> dims) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(dims, os, [&](int64_t dim) { os << dimText(dim); });
  os << ']';
  return text;
}

/// Whether `type` is a tensor with a dynamic extent.
bool isDynamicTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && !tensor.hasStaticShape();
}

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// The numpy broadcast of two shapes, or the first dimension (counted from
/// the end, as a negative number) where they disagree. A dynamic extent
/// meets another dynamic one (a function's `?` are one size) or 1; against a
/// static extent other than 1 it would hold only at that size, so it is a
/// mismatch.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                ArrayRef<int64_t> rhs,
                                                int64_t &badDimFromEnd) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1) {
      badDimFromEnd = -static_cast<int64_t>(i) - 1;
      return failure();
    }
    out[rank - 1 - i] = l == 1 ? r : l;
  }
  return out;
}

/// The broadcast of a select's three operand shapes (condition or mask,
/// true value, false value), or the first dimension where they disagree.
FailureOr<SmallVector<int64_t>> broadcastSelectShapes(RankedTensorType cond,
                                                      RankedTensorType t,
                                                      RankedTensorType f,
                                                      int64_t &badDim) {
  FailureOr<SmallVector<int64_t>> values =
      broadcastShapes(t.getShape(), f.getShape(), badDim);
  if (failed(values))
    return failure();
  return broadcastShapes(cond.getShape(), *values, badDim);
}

/// The kernel a tile op lives in, or an error when it is not in the body of
/// a tiled kernel.
LogicalResult verifyInTiledKernel(Operation *op) {
  auto kernel = op->getParentOfType<KernelOp>();
  if (!kernel || !kernel.isTiled())
    return op->emitOpError()
           << "is a tile op and must be inside the body of a tiled kg.kernel";
  return success();
}

bool isFloat8(Type type) { return isa<Float8E4M3FNType, Float8E5M2Type>(type); }

/// Element types that a matmul or a tile dot accepts together.
LogicalResult verifyDotOperandTypes(Operation *op, Type a, Type b,
                                    std::optional<Precision> precision) {
  Type ea = cast<ShapedType>(a).getElementType();
  Type eb = cast<ShapedType>(b).getElementType();
  if (!isa<FloatType>(ea) || !isa<FloatType>(eb))
    return op->emitOpError()
           << "multiplies floats only (f32, f16, bf16, f8E4M3FN, f8E5M2), "
              "got a "
           << a << " and b " << b << "; cast integer and i1 operands first";
  if (ea != eb && !(isFloat8(ea) && isFloat8(eb)))
    return op->emitOpError()
           << "operands must share an element type (the two 8-bit floats "
              "may mix), got a "
           << a << " and b " << b;
  if (precision == Precision::fast_accum) {
    // Only 8-bit float dots sum their products outside f32 at all.
    if (!isFloat8(ea) || !isFloat8(eb))
      return op->emitOpError()
             << "precision = fast_accum applies to 8-bit float operands "
                "only, got a "
             << a << " and b " << b;
    return success();
  }
  if (precision && !ea.isF32())
    return op->emitOpError()
           << "precision applies to f32 operands only, got a " << a << " and b "
           << b;
  return success();
}

/// The layer_norm and rms_norm rules: normalized_shape names the trailing
/// dimensions of x; weight and bias have that shape and x's element type.
LogicalResult verifyNorm(Operation *op, Value x, ArrayRef<Value> affine,
                         ArrayRef<StringRef> affineNames,
                         ArrayRef<int64_t> normalizedShape, double eps,
                         Type resultType) {
  RankedTensorType xType = tensorType(x);
  ArrayRef<int64_t> shape = xType.getShape();
  if (normalizedShape.empty() || normalizedShape.size() > shape.size() ||
      shape.take_back(normalizedShape.size()) != normalizedShape)
    return op->emitOpError()
           << "normalized_shape " << shapeText(normalizedShape)
           << " must equal the trailing dimensions of x " << xType;
  // The mean of the normalization divides by the number of elements.
  if (llvm::is_contained(normalizedShape, 0))
    return op->emitOpError()
           << "normalizes over zero elements: normalized_shape "
           << shapeText(normalizedShape) << " of x " << xType << " is empty";
  for (auto [value, name] : llvm::zip(affine, affineNames)) {
    if (!value)
      continue;
    RankedTensorType type = tensorType(value);
    if (type.getShape() != normalizedShape)
      return op->emitOpError()
             << name << " " << type << " must have shape normalized_shape "
             << shapeText(normalizedShape);
    if (type.getElementType() != xType.getElementType())
      return op->emitOpError() << name << " " << type
                               << " must have the element type of x " << xType;
  }
  if (!(eps > 0.0))
    return op->emitOpError() << "eps must be positive, got " << eps;
  if (resultType != xType)
    return op->emitOpError() << "result type " << resultType
                             << " must equal the type of x " << xType;
  return success();
}

/// Rules shared by tile loads and stores.
LogicalResult verifyTileAccess(Operation *op, MemRefType buffer,
                               RankedTensorType tile, size_t numOffsets,
                               StringRef bufferName) {
  if (failed(verifyInTiledKernel(op)))
    return failure();
  if (numOffsets != static_cast<size_t>(buffer.getRank()))
    return op->emitOpError()
           << "takes one offset per dimension of " << bufferName << " "
           << buffer << ", got " << numOffsets;
  if (tile.getRank() != buffer.getRank())
    return op->emitOpError() << "tile " << tile << " must have the rank of "
                             << bufferName << " " << buffer;
  if (tile.getElementType() != buffer.getElementType())
    return op->emitOpError()
           << "tile " << tile << " must have the element type of "
           << bufferName << " " << buffer;
  return success();
}

/// What a bulk tensor copy (TMA) needs of the buffer it reads or writes:
/// one dimension of unit stride, and the other strides and the offset in
/// multiples of 16 bytes (Triton's tensor descriptors and the hardware's
/// tensor maps take no other layout).
LogicalResult verifyTmaBuffer(Operation *op, MemRefType buffer,
                              StringRef bufferName) {
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (failed(buffer.getStridesAndOffset(strides, offset)))
    return op->emitOpError() << "tma needs a strided " << bufferName << ", got "
                             << buffer;
  int64_t bytes = buffer.getElementTypeBitWidth() / 8;
  bool unit = false;
  for (int64_t stride : strides) {
    if (stride == 1 && !unit) {
      unit = true;
      continue;
    }
    if (stride != 0 && (stride * bytes) % 16 != 0)
      return op->emitOpError()
             << "tma needs the strides of " << bufferName << " " << buffer
             << " other than its unit stride to be multiples of 16 bytes; "
             << stride << " elements are " << stride * bytes << " bytes";
  }
  if (!unit)
    return op->emitOpError() << "tma needs a dimension of unit stride in "
                             << bufferName << " " << buffer;
  if ((offset * bytes) % 16 != 0)
    return op->emitOpError() << "tma needs the offset of " << bufferName << " "
                             << buffer << " to be a multiple of 16 bytes; "
                             << offset << " elements are " << offset * bytes
                             << " bytes";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// Ops whose result has the type of their first operand.
#define KG_RESULT_TYPE_OF_X(OP)                                                \
  LogicalResult OP::inferReturnTypes(                                         \
      MLIRContext *, std::optional<Location>, OP::Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    inferred.push_back(adaptor.getX().getType());                              \
    return success();                                                          \
  }

KG_RESULT_TYPE_OF_X(ExpOp)
KG_RESULT_TYPE_OF_X(LogOp)
KG_RESULT_TYPE_OF_X(SqrtOp)
KG_RESULT_TYPE_OF_X(RsqrtOp)
KG_RESULT_TYPE_OF_X(NegOp)
KG_RESULT_TYPE_OF_X(AbsOp)
KG_RESULT_TYPE_OF_X(ReluOp)
KG_RESULT_TYPE_OF_X(SiluOp)
KG_RESULT_TYPE_OF_X(SigmoidOp)
KG_RESULT_TYPE_OF_X(TanhOp)
KG_RESULT_TYPE_OF_X(SinOp)
KG_RESULT_TYPE_OF_X(CosOp)
KG_RESULT_TYPE_OF_X(SquareOp)
KG_RESULT_TYPE_OF_X(ReciprocalOp)
KG_RESULT_TYPE_OF_X(LogicalNotOp)
KG_RESULT_TYPE_OF_X(GeluOp)
KG_RESULT_TYPE_OF_X(ClampOp)
KG_RESULT_TYPE_OF_X(SoftmaxOp)

#undef KG_RESULT_TYPE_OF_X

LogicalResult ClampOp::verify() {
  std::optional<APFloat> lo = getMin(), hi = getMax();
  if (!lo && !hi)
    return emitOpError() << "needs a min, a max or both";
  if (lo && hi && lo->convertToDouble() > hi->convertToDouble())
    return emitOpError() << "min " << lo->convertToDouble()
                         << " is greater than max " << hi->convertToDouble();
  return success();
}

/// Shared by every binary op and kg.cmp: the operands share an element
/// type and broadcast; the result has the broadcast shape and `element`
/// (the operands' element type when null).
static LogicalResult verifyBinary(Operation *op, Type element = {}) {
  RankedTensorType lhs = tensorType(op->getOperand(0));
  RankedTensorType rhs = tensorType(op->getOperand(1));
  RankedTensorType out = tensorType(op->getResult(0));
  if (lhs.getElementType() != rhs.getElementType())
    return op->emitOpError()
           << "operands must share an element type, got lhs " << lhs
           << " and rhs " << rhs;
  int64_t badDim = 0;
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(lhs.getShape(), rhs.getShape(), badDim);
  if (failed(shape))
    return op->emitOpError()
           << "operands are not broadcast-compatible: lhs " << lhs << " and rhs "
           << rhs << " differ in dimension " << badDim;
  auto expected =
      RankedTensorType::get(*shape, element ? element : lhs.getElementType());
  if (out != expected)
    return op->emitOpError() << "result type " << out
                             << " must be the broadcast type " << expected
                             << " of lhs " << lhs << " and rhs " << rhs;
  return success();
}

LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
LogicalResult DivOp::verify() { return verifyBinary(*this); }
LogicalResult MaximumOp::verify() { return verifyBinary(*this); }
LogicalResult MinimumOp::verify() { return verifyBinary(*this); }
LogicalResult PowOp::verify() { return verifyBinary(*this); }
LogicalResult LogicalAndOp::verify() { return verifyBinary(*this); }
LogicalResult LogicalOrOp::verify() { return verifyBinary(*this); }
LogicalResult LogicalXorOp::verify() { return verifyBinary(*this); }

LogicalResult CmpOp::verify() {
  return verifyBinary(*this, IntegerType::get(getContext(), 1));
}

LogicalResult SelectOp::verify() {
  RankedTensorType cond = getCond().getType();
  RankedTensorType t = getTrueValue().getType(), f = getFalseValue().getType();
  RankedTensorType out = getOut().getType();
  if (t.getElementType() != f.getElementType())
    return emitOpError() << "true_value " << t << " and false_value " << f
                         << " must share an element type";
  int64_t badDim = 0;
  FailureOr<SmallVector<int64_t>> shape =
      broadcastSelectShapes(cond, t, f, badDim);
  if (failed(shape))
    return emitOpError() << "operands are not broadcast-compatible: cond "
                         << cond << ", true_value " << t << " and false_value "
                         << f << " differ in dimension " << badDim;
  auto expected = RankedTensorType::get(*shape, t.getElementType());
  if (out != expected)
    return emitOpError() << "result type " << out
                         << " must be the broadcast type " << expected
                         << " of cond " << cond << ", true_value " << t
                         << " and false_value " << f;
  return success();
}

LogicalResult IotaOp::verify() {
  RankedTensorType out = getOut().getType();
  int64_t dim = getDim(), start = getStart();
  if (out.getRank() == 0)
    return emitOpError() << "result " << out
                         << " must have at least one dimension to count along";
  if (dim < 0 || dim >= out.getRank())
    return emitOpError() << "dim " << dim << " is out of range for result "
                         << out << " (rank " << out.getRank() << ")";
  int64_t count = out.getDimSize(dim);
  // Positions are computed in i32 except for an i64 result, whose start
  // is added in i64 from a constant (an f64 attribute: exact to 2^53).
  bool wide = out.getElementType().isInteger(64);
  int64_t limit = int64_t(1) << 53;
  int64_t lo = wide ? -limit : INT32_MIN, hi = wide ? limit : INT32_MAX;
  if (start < lo || (count > 0 && start > hi - (count - 1)))
    return emitOpError() << "counts from " << start << " over " << count
                         << " elements of dimension " << dim << ", beyond the "
                         << (wide ? "range of 2^53 (i64)" : "i32 range")
                         << ", for result " << out;
  return success();
}

LogicalResult ConstantOp::verify() {
  Type element = getOut().getType().getElementType();
  APFloat value = getValue();
  if (value.isNaN())
    return emitOpError() << "value must not be NaN";
  if (auto integer = dyn_cast<IntegerType>(element)) {
    double number = value.convertToDouble();
    unsigned width = integer.getWidth();
    // i1 holds 0 and 1; wider integers are signed. 2^53 bounds the whole
    // numbers an f64 holds exactly.
    double lo = width == 1 ? 0.0 : std::max(-9007199254740992.0, -std::ldexp(1.0, width - 1));
    double hi = width == 1 ? 1.0 : std::min(9007199254740992.0, std::ldexp(1.0, width - 1) - 1);
    if (value.isInfinity() || number != std::trunc(number) || number < lo ||
        number > hi)
      return emitOpError() << "value " << number << " is not "
                           << (width == 1 ? "0 or 1" : "a whole number")
                           << " in the range of the element type " << element
                           << (width == 1 ? "" : " (and within 2^53)");
    return success();
  }
  auto floatType = cast<FloatType>(element);
  if (value.isInfinity())
    return success();
  bool losesInfo = false;
  APFloat::opStatus status = value.convert(
      floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &losesInfo);
  if (status & APFloat::opOverflow)
    return emitOpError() << "value " << getValue().convertToDouble()
                         << " overflows the element type " << element;
  return success();
}

LogicalResult CastOp::verify() {
  RankedTensorType in = getX().getType(), out = getOut().getType();
  if (in.getShape() != out.getShape())
    return emitOpError() << "cannot change the shape: x " << in
                         << " and result " << out;
  return success();
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  RankedTensorType a = getA().getType(), b = getB().getType();
  RankedTensorType out = getOut().getType();
  if (a.getRank() < 2)
    return emitOpError() << "operand a " << a << " must have rank 2 or more";
  if (b.getRank() < 2)
    return emitOpError() << "operand b " << b << " must have rank 2 or more";
  if (failed(verifyDotOperandTypes(*this, a, b, getPrecision())))
    return failure();
  int64_t m = a.getDimSize(a.getRank() - 2), k = a.getDimSize(a.getRank() - 1);
  int64_t kb = b.getDimSize(b.getRank() - 2), n = b.getDimSize(b.getRank() - 1);
  if (k != kb)
    return emitOpError() << "contracting dimensions differ: a " << a
                         << " has K = " << dimText(k) << ", b " << b
                         << " has K = " << dimText(kb);
  int64_t badDim = 0;
  FailureOr<SmallVector<int64_t>> batch = broadcastShapes(
      a.getShape().drop_back(2), b.getShape().drop_back(2), badDim);
  if (failed(batch))
    return emitOpError() << "batch dimensions of a " << a << " and b " << b
                         << " are not broadcast-compatible (dimension "
                         << badDim << " of the batch shape)";
  SmallVector<int64_t> expected = *batch;
  expected.push_back(m);
  expected.push_back(n);
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result " << out << " must have shape "
                         << shapeText(expected) << " for a " << a << " and b "
                         << b;
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::verify() {
  RankedTensorType x = getX().getType(), out = getOut().getType();
  ArrayRef<int64_t> dims = getDims();
  if (dims.empty())
    return emitOpError() << "needs at least one dimension to reduce";
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= x.getRank())
      return emitOpError() << "dimension " << dim << " is out of range for x "
                           << x << " (rank " << x.getRank() << ")";
    if (!seen.insert(dim).second)
      return emitOpError() << "dimension " << dim << " appears twice in dims "
                           << shapeText(dims) << " of x " << x;
  }
  // A sum over nothing is 0; a mean, max or min over nothing has no value
  // (torch gives NaN or an error), so it is refused here, before any pass
  // divides by the count.
  if (getKind() != ReduceKind::sum) {
    for (int64_t dim : dims) {
      if (x.getDimSize(dim) == 0)
        return emitOpError()
               << stringifyReduceKind(getKind()) << " over zero elements: dimension "
               << dim << " of x " << x << " is empty";
    }
  }
  if (out.getElementType() != x.getElementType())
    return emitOpError() << "result " << out
                         << " must have the element type of x " << x;
  SmallVector<int64_t> expected;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    if (!seen.contains(d))
      expected.push_back(x.getDimSize(d));
    else if (getKeepdim())
      expected.push_back(1);
  }
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result " << out << " must have shape "
                         << shapeText(expected) << " after reducing x " << x
                         << " over " << shapeText(dims)
                         << (getKeepdim() ? " with keepdim" : "");
  return success();
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getX().getType().getRank();
  if (getDim() < 0 || getDim() >= rank)
    return emitOpError() << "dim " << getDim() << " is out of range for x "
                         << getX().getType() << " (rank " << rank << ")";
  return success();
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getX(), {getWeight()}, {"weight"},
                    getNormalizedShape(), getEps().convertToDouble(),
                    getOut().getType());
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getX(), {getWeight(), getBias()},
                    {"weight", "bias"}, getNormalizedShape(),
                    getEps().convertToDouble(), getOut().getType());
}

//===----------------------------------------------------------------------===//
// View ops
//===----------------------------------------------------------------------===//

/// View ops never change the element type.
static LogicalResult verifySameElementType(Operation *op,
                                           RankedTensorType in,
                                           RankedTensorType out) {
  if (in.getElementType() != out.getElementType())
    return op->emitOpError() << "result " << out
                             << " must have the element type of x " << in;
  return success();
}

LogicalResult TransposeOp::verify() {
  RankedTensorType x = getX().getType(), out = getOut().getType();
  ArrayRef<int64_t> perm = getPermutation();
  if (static_cast<int64_t>(perm.size()) != x.getRank())
    return emitOpError() << "permutation " << shapeText(perm)
                         << " must have one entry per dimension of x " << x;
  SmallVector<bool> used(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || used[p])
      return emitOpError() << "permutation " << shapeText(perm)
                           << " is not a permutation of [0, " << x.getRank()
                           << ")";
    used[p] = true;
  }
  if (failed(verifySameElementType(*this, x, out)))
    return failure();
  SmallVector<int64_t> expected;
  for (int64_t p : perm)
    expected.push_back(x.getDimSize(p));
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result " << out << " must have shape "
                         << shapeText(expected) << " for x " << x
                         << " permuted by " << shapeText(perm);
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType x = getX().getType(), out = getOut().getType();
  if (failed(verifySameElementType(*this, x, out)))
    return failure();
  if (x.hasStaticShape() && out.hasStaticShape()) {
    if (x.getNumElements() != out.getNumElements())
      return emitOpError() << "result " << out << " holds "
                           << out.getNumElements() << " elements but x " << x
                           << " holds " << x.getNumElements();
    return success();
  }
  // With a dynamic extent the element counts agree at every size only when
  // each side has one `?` (the same size) and the static extents multiply
  // to the same number.
  auto staticProduct = [](RankedTensorType type) {
    int64_t product = 1;
    for (int64_t dim : type.getShape())
      if (!ShapedType::isDynamic(dim))
        product *= dim;
    return product;
  };
  if (x.getNumDynamicDims() != 1 || out.getNumDynamicDims() != 1)
    return emitOpError() << "x " << x << " and result " << out
                         << " must have one dynamic extent each to be the same "
                            "number of elements at every size";
  if (staticProduct(x) != staticProduct(out))
    return emitOpError() << "result " << out << " holds " << staticProduct(out)
                         << " elements per unit of the dynamic extent but x "
                         << x << " holds " << staticProduct(x);
  return success();
}

LogicalResult BroadcastToOp::verify() {
  RankedTensorType x = getX().getType(), out = getOut().getType();
  if (failed(verifySameElementType(*this, x, out)))
    return failure();
  if (x.getRank() > out.getRank())
    return emitOpError() << "cannot broadcast x " << x << " to the lower rank of "
                         << out;
  int64_t lead = out.getRank() - x.getRank();
  for (int64_t d = 0; d < x.getRank(); ++d) {
    int64_t from = x.getDimSize(d), to = out.getDimSize(lead + d);
    if (from != to && from != 1)
      return emitOpError() << "cannot broadcast x " << x << " to " << out
                           << ": dimension " << d << " is " << dimText(from)
                           << ", not 1 or " << dimText(to);
  }
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  RankedTensorType first = tensorType(getInputs().front());
  RankedTensorType out = getOut().getType();
  int64_t rank = first.getRank(), dim = getDim();
  if (dim < 0 || dim >= rank)
    return emitOpError() << "dim " << dim << " is out of range for inputs of rank "
                         << rank << " (input #0 " << first << ")";
  int64_t total = 0;
  for (auto [index, value] : llvm::enumerate(getInputs())) {
    RankedTensorType type = tensorType(value);
    if (type.getRank() != rank)
      return emitOpError() << "input #" << index << " " << type
                           << " must have the rank of input #0 " << first;
    if (type.getElementType() != first.getElementType())
      return emitOpError() << "input #" << index << " " << type
                           << " must have the element type of input #0 "
                           << first;
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim && type.getDimSize(d) != first.getDimSize(d))
        return emitOpError()
               << "input #" << index << " " << type << " differs from input #0 "
               << first << " in dimension " << d
               << ", which is not the concat dimension " << dim;
    if (type.isDynamicDim(dim))
      return emitOpError() << "input #" << index << " " << type
                           << " has a dynamic extent in the concat dimension "
                           << dim << "; concat joins static extents only";
    total += type.getDimSize(dim);
  }
  SmallVector<int64_t> expected(first.getShape());
  expected[dim] = total;
  if (out != RankedTensorType::get(expected, first.getElementType()))
    return emitOpError() << "result " << out << " must have shape "
                         << shapeText(expected) << " and element type "
                         << first.getElementType();
  return success();
}

LogicalResult SliceOp::verify() {
  RankedTensorType x = getX().getType(), out = getOut().getType();
  ArrayRef<int64_t> offsets = getOffsets(), strides = getStrides();
  if (static_cast<int64_t>(offsets.size()) != x.getRank() ||
      static_cast<int64_t>(strides.size()) != x.getRank())
    return emitOpError() << "offsets " << shapeText(offsets) << " and strides "
                         << shapeText(strides)
                         << " must have one entry per dimension of x " << x;
  if (out.getRank() != x.getRank())
    return emitOpError() << "result " << out << " must have the rank of x " << x;
  if (failed(verifySameElementType(*this, x, out)))
    return failure();
  for (int64_t d = 0; d < x.getRank(); ++d) {
    // A dynamic extent is taken whole: its end is not known to slice it.
    if (x.isDynamicDim(d) || out.isDynamicDim(d)) {
      if (x.getDimSize(d) != out.getDimSize(d) || offsets[d] != 0 ||
          strides[d] != 1)
        return emitOpError() << "dimension " << d << " of x " << x
                             << " and result " << out
                             << " is dynamic; it must be taken whole (offset 0, "
                                "stride 1, size ?)";
      continue;
    }
    if (offsets[d] < 0)
      return emitOpError() << "offset " << offsets[d] << " of dimension " << d
                           << " of x " << x << " is negative";
    if (strides[d] <= 0)
      return emitOpError() << "stride " << strides[d] << " of dimension " << d
                           << " of x " << x << " must be positive";
    // Index offsets + (size - 1) * strides must stay below the dimension;
    // compared by division so that large strides cannot overflow.
    int64_t steps = out.getDimSize(d) - 1;
    if (steps > 0 && (offsets[d] >= x.getDimSize(d) ||
                      steps > (x.getDimSize(d) - 1 - offsets[d]) / strides[d]))
      return emitOpError() << "dimension " << d << " takes " << out.getDimSize(d)
                           << " elements from offset " << offsets[d]
                           << " with stride " << strides[d]
                           << ", past the end of x " << x;
    if (steps == 0 && offsets[d] >= x.getDimSize(d))
      return emitOpError() << "offset " << offsets[d] << " of dimension " << d
                           << " is past the end of x " << x;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Indexed ops
//===----------------------------------------------------------------------===//

/// Checks what kg.gather and kg.scatter share: `dim` names a dimension of
/// `base` (the table or the destination), `indices` is 1-D, and `sliced`
/// (the gather's result, the scatter's source) is `base` with dimension
/// `dim` replaced by the number of indices, in the element type of `base`.
static LogicalResult verifyIndexed(Operation *op, StringRef baseName,
                                   RankedTensorType base, Value indicesValue,
                                   int64_t dim, StringRef slicedName,
                                   RankedTensorType sliced) {
  RankedTensorType indices = tensorType(indicesValue);
  if (base.getRank() == 0)
    return op->emitOpError() << baseName << " " << base
                             << " must have at least one dimension to index";
  if (dim < 0 || dim >= base.getRank())
    return op->emitOpError() << "dim " << dim << " is out of range for "
                             << baseName << " " << base << " of rank "
                             << base.getRank();
  if (indices.getRank() != 1)
    return op->emitOpError() << "indices " << indices
                             << " must be 1-D (reshape them to one dimension)";
  SmallVector<int64_t> expected(base.getShape());
  expected[dim] = indices.getDimSize(0);
  if (sliced != RankedTensorType::get(expected, base.getElementType()))
    return op->emitOpError()
           << slicedName << " " << sliced << " must have shape "
           << shapeText(expected) << " (" << baseName << " " << base
           << " with dimension " << dim << " replaced by the "
           << dimText(indices.getDimSize(0)) << " indices) and element type "
           << base.getElementType();
  return success();
}

LogicalResult GatherOp::verify() {
  return verifyIndexed(getOperation(), "table", getTable().getType(),
                       getIndices(), getDim(), "result", getOut().getType());
}

LogicalResult ScatterOp::verify() {
  RankedTensorType dest = getDest().getType(), out = getOut().getType();
  if (failed(verifyIndexed(getOperation(), "dest", dest, getIndices(), getDim(),
                           "source", getSource().getType())))
    return failure();
  if (out != dest)
    return emitOpError() << "result " << out << " must have the type of dest "
                         << dest;
  Type element = dest.getElementType();
  if (getMode() == ScatterMode::add &&
      (element.isInteger(1) || isFloat8(element)))
    return emitOpError() << "mode add needs f32, f16, bf16, i32 or i64 elements, "
                            "not those of dest "
                         << dest;
  return success();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

bool KernelOp::isTiled() {
  Block &body = getBody().front();
  return getNumResults() > 0 &&
         body.getNumArguments() == getInputs().size() + getNumResults() &&
         llvm::all_of(body.getArgumentTypes(),
                      [](Type t) { return isa<MemRefType>(t); });
}

// The form of the kernel's config: a dictionary of knobs named by
// identifiers, each a flag or a positive integer. Which knobs a kernel has
// and which values suit its extents is for its schedule to say (kg-tile),
// as schedules may be added without touching the dialect.
static LogicalResult verifyConfig(KernelOp op) {
  DictionaryAttr config = op.getConfigAttr();
  if (!config)
    return success();
  for (NamedAttribute knob : config) {
    StringRef name = knob.getName().getValue();
    bool identifier =
        !name.empty() && (llvm::isAlpha(name.front()) || name.front() == '_') &&
        llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
    if (!identifier)
      return op.emitOpError() << "config knob \"" << name
                              << "\" must be named by an identifier (a letter "
                                 "or _, then letters, digits or _)";
    if (isa<BoolAttr>(knob.getValue()))
      continue;
    auto value = dyn_cast<IntegerAttr>(knob.getValue());
    if (!value || !value.getType().isSignlessInteger(64))
      return op.emitOpError() << "config knob " << name << " = "
                              << knob.getValue()
                              << " must be an i64 integer or a boolean";
    if (value.getInt() < 1)
      return op.emitOpError() << "config knob " << name << " = "
                              << value.getInt() << " must be a positive integer";
  }
  return success();
}

LogicalResult KernelOp::verify() {
  if (getNumResults() == 0)
    return emitOpError() << "must produce at least one tensor";
  if (failed(verifyConfig(*this)))
    return failure();
  Block &body = getBody().front();
  auto yield = body.empty() ? YieldOp() : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError() << "body must end in kg.yield, found "
                         << (body.empty() ? StringRef("an empty block")
                                          : body.back().getName().getStringRef());

  if (isTiled()) {
    SmallVector<Type> tensors(getInputs().getTypes());
    llvm::append_range(tensors, getResultTypes());
    for (auto [index, pair] :
         llvm::enumerate(llvm::zip(tensors, body.getArgumentTypes()))) {
      auto [tensor, arg] = pair;
      auto buffer = cast<MemRefType>(arg);
      auto expected = cast<RankedTensorType>(tensor);
      if (buffer.getShape() != expected.getShape() ||
          buffer.getElementType() != expected.getElementType() ||
          !buffer.getLayout().isIdentity())
        return emitOpError() << "buffer argument #" << index << " " << buffer
                             << " must be a contiguous memref with the shape "
                                "and element type of "
                             << expected;
    }
    if (!yield.getValues().empty())
      return emitOpError() << "a tiled kernel ends in an empty kg.yield, found one "
                              "with "
                           << yield.getValues().size() << " operands";
    return success();
  }

  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body takes " << body.getNumArguments()
                         << " arguments for " << getInputs().size()
                         << " inputs (tiled form: one memref per input and "
                            "per result)";
  for (auto [index, pair] : llvm::enumerate(
           llvm::zip(getInputs().getTypes(), body.getArgumentTypes()))) {
    auto [input, arg] = pair;
    if (input != arg)
      return emitOpError() << "body argument #" << index << " has type " << arg
                           << " but input #" << index << " has type " << input;
  }
  if (yield.getValues().getTypes() != getResultTypes()) {
    std::string got, want;
    llvm::raw_string_ostream gotOs(got), wantOs(want);
    llvm::interleaveComma(yield.getValues().getTypes(), gotOs);
    llvm::interleaveComma(getResultTypes(), wantOs);
    return emitOpError() << "kg.yield returns (" << got
                         << ") but the kernel produces (" << want << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Tile ops
//===----------------------------------------------------------------------===//

LogicalResult ProgramIdOp::verify() {
  int64_t axis = getAxisAttr().getValue().getSExtValue();
  if (axis < 0 || axis > 2)
    return emitOpError() << "axis " << axis << " must be 0, 1 or 2";
  return verifyInTiledKernel(*this);
}

LogicalResult ScalarArgOp::verify() {
  if (failed(verifyInTiledKernel(*this)))
    return failure();
  auto kernel = (*this)->getParentOfType<KernelOp>();
  auto scalars = kernel->getAttrOfType<DenseI64ArrayAttr>("scalars");
  int64_t count = scalars ? scalars.size() : 0;
  int64_t index = getIndexAttr().getValue().getSExtValue();
  if (index < 0 || index >= count)
    return emitOpError() << "index " << index << " is not below the kernel's "
                         << count << " scalar arguments (its scalars attribute)";
  return success();
}

LogicalResult TileRangeOp::verify() {
  if (failed(verifyInTiledKernel(*this)))
    return failure();
  RankedTensorType result = getResult().getType();
  int64_t axis = getAxis();
  if (axis < 0 || axis >= result.getRank())
    return emitOpError() << "axis " << axis << " is out of range for result "
                         << result << " (rank " << result.getRank() << ")";
  for (int64_t d = 0; d < result.getRank(); ++d)
    if (d != axis && result.getDimSize(d) != 1)
      return emitOpError() << "result " << result << " varies along axis "
                           << axis << " only: dimension " << d
                           << " must have size 1";
  return success();
}

LogicalResult TileLoadOp::verify() {
  if (failed(verifyTileAccess(*this, getSrc().getType(), getResult().getType(),
                              getOffsets().size(), "src")))
    return failure();
  if (!getTma())
    return success();
  if (getMask() && getPadding() && getPadding()->convertToDouble() != 0.0)
    return emitOpError() << "a masked tma load reads zeros outside its buffer; "
                            "its padding must be 0, got "
                         << getPadding()->convertToDouble();
  return verifyTmaBuffer(*this, getSrc().getType(), "src");
}

LogicalResult TileGatherOp::verify() {
  MemRefType src = getSrc().getType();
  RankedTensorType tile = getResult().getType();
  if (failed(verifyTileAccess(*this, src, tile, getOffsets().size(), "src")))
    return failure();
  int64_t dim = getDim();
  if (dim < 0 || dim >= src.getRank())
    return emitOpError() << "dim " << dim << " is out of range for src " << src
                         << " of rank " << src.getRank();
  RankedTensorType indices = getIndices().getType();
  bool broadcasts = indices.getRank() == tile.getRank();
  for (int64_t d = 0; broadcasts && d < tile.getRank(); ++d)
    broadcasts = indices.getDimSize(d) == 1 ||
                 indices.getDimSize(d) == tile.getDimSize(d);
  if (!broadcasts)
    return emitOpError() << "indices " << indices
                         << " must broadcast to the tile " << tile
                         << " (the same rank, each dimension 1 or the tile's)";
  return success();
}

LogicalResult TileStoreOp::verify() {
  if (failed(verifyTileAccess(*this, getDst().getType(), getValue().getType(),
                              getOffsets().size(), "dst")))
    return failure();
  return getTma() ? verifyTmaBuffer(*this, getDst().getType(), "dst") : success();
}

LogicalResult TileMaskOp::verify() {
  if (failed(verifyInTiledKernel(*this)))
    return failure();
  RankedTensorType mask = getMask().getType();
  size_t rank = mask.getRank();
  if (getOffsets().size() != rank || getLower().size() != rank ||
      getUpper().size() != rank)
    return emitOpError() << "needs one offset, lower and upper bound per "
                            "dimension of the mask "
                         << mask << ", got " << getOffsets().size()
                         << " offsets, " << getLower().size() << " lower and "
                         << getUpper().size() << " upper bounds";
  for (size_t d = 0; d < rank; ++d)
    if (getLower()[d] >= getUpper()[d])
      return emitOpError() << "empty box in dimension " << d << ": lower "
                           << getLower()[d] << " >= upper " << getUpper()[d];
  ArrayRef<int64_t> dims;
  if (std::optional<ArrayRef<int64_t>> given = getDynamicDims())
    dims = *given;
  if (dims.size() != getDynamicUpper().size())
    return emitOpError() << "names " << dims.size()
                         << " dimensions with a dynamic upper bound but has "
                         << getDynamicUpper().size() << " dynamic_upper operands";
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t d : dims)
    if (d < 0 || d >= static_cast<int64_t>(rank) || !seen.insert(d).second)
      return emitOpError() << "dynamic_upper names dimension " << d
                           << ", which is out of range for the mask " << mask
                           << " or named twice";
  return success();
}

LogicalResult TileDotOp::verify() {
  if (failed(verifyInTiledKernel(*this)))
    return failure();
  RankedTensorType a = getA().getType(), b = getB().getType();
  RankedTensorType acc = getAcc().getType(), out = getOut().getType();
  int64_t rank = a.getRank();
  if (rank < 3 || b.getRank() != rank || acc.getRank() != rank)
    return emitOpError() << "takes tiles of one rank, 3 or more, whose last "
                            "axes (or the axes dims names) are M, K and N; got a "
                         << a << ", b " << b << " and acc " << acc;
  if (failed(verifyDotOperandTypes(*this, a, b, getPrecision())))
    return failure();
  int64_t m = rank - 3, k = rank - 2, n = rank - 1;
  if (std::optional<ArrayRef<int64_t>> dims = getDims()) {
    if (dims->size() != 3 || llvm::any_of(*dims, [&](int64_t d) {
          return d < 0 || d >= rank;
        }) || (*dims)[0] == (*dims)[1] || (*dims)[1] == (*dims)[2] ||
        (*dims)[0] == (*dims)[2])
      return emitOpError() << "dims must name three distinct axes below "
                           << rank << " (M, K, N)";
    m = (*dims)[0];
    k = (*dims)[1];
    n = (*dims)[2];
  }
  // Every axis but the two an operand spans is 1.
  auto spans = [&](RankedTensorType type, int64_t x, int64_t y) {
    for (auto [axis, size] : llvm::enumerate(type.getShape()))
      if ((int64_t)axis != x && (int64_t)axis != y && size != 1)
        return false;
    return true;
  };
  if (!getDims() && (!spans(a, m, k) || !spans(b, k, n) || !spans(acc, m, n)))
    return emitOpError() << "expects a [..., M, K, 1], b [..., 1, K, N] and acc "
                            "[..., M, 1, N] with leading axes of 1; got a "
                         << a << ", b " << b << " and acc " << acc;
  if (!spans(a, m, k) || !spans(b, k, n) || !spans(acc, m, n))
    return emitOpError() << "expects a over axes M, K (" << m << ", " << k
                         << "), b over K, N (" << k << ", " << n
                         << ") and acc over M, N, every other axis 1; got a "
                         << a << ", b " << b << " and acc " << acc;
  if (a.getDimSize(k) != b.getDimSize(k))
    return emitOpError() << "contracting dimensions differ: a " << a << " and b "
                         << b;
  if (acc.getDimSize(m) != a.getDimSize(m) || acc.getDimSize(n) != b.getDimSize(n))
    return emitOpError() << "acc " << acc << " must be [..., M, 1, N] for a " << a
                         << " and b " << b;
  if (out != acc)
    return emitOpError() << "result " << out << " must have the type of acc "
                         << acc;
  return success();
}

LogicalResult TileSelectOp::verify() {
  if (failed(verifyInTiledKernel(*this)))
    return failure();
  RankedTensorType mask = getMask().getType();
  RankedTensorType t = getTrueValue().getType(), f = getFalseValue().getType();
  RankedTensorType out = getOut().getType();
  if (t.getElementType() != f.getElementType())
    return emitOpError() << "true_value " << t << " and false_value " << f
                         << " must share an element type";
  int64_t badDim = 0;
  FailureOr<SmallVector<int64_t>> shape =
      broadcastSelectShapes(mask, t, f, badDim);
  if (failed(shape))
    return emitOpError() << "mask " << mask << ", true_value " << t
                         << " and false_value " << f
                         << " are not broadcast-compatible";
  auto expected = RankedTensorType::get(*shape, t.getElementType());
  if (out != expected)
    return emitOpError() << "result " << out << " must be the broadcast type "
                         << expected;
  return success();
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

LogicalResult LaunchOp::verify() {
  ArrayRef<int64_t> grid = getGrid();
  if (grid.size() != 3 ||
      llvm::any_of(grid, [](int64_t g) { return g < 1 || g > 2147483647; }))
    return emitOpError() << "grid " << shapeText(grid)
                         << " must hold three program counts in [1, 2^31)";
  if (getNumWarps() < 1 || !llvm::isPowerOf2_64(getNumWarps()))
    return emitOpError() << "num_warps " << getNumWarps()
                         << " must be a power of two";
  if (getNumStages() < 1)
    return emitOpError() << "num_stages " << getNumStages()
                         << " must be positive";
  if (std::optional<ArrayRef<int64_t>> scalars = getScalars())
    for (int64_t value : *scalars)
      if (value < INT32_MIN || value > INT32_MAX)
        return emitOpError() << "scalar argument " << value
                             << " does not fit an i32";
  bool dynamic = llvm::any_of(getOperandTypes(), isDynamicTensor) ||
                 llvm::any_of(getResultTypes(), isDynamicTensor);
  std::optional<ArrayRef<int64_t>> dynamicGrid = getDynamicGrid();
  if (dynamic && !dynamicGrid)
    return emitOpError() << "launches on a dynamic extent (`?`) and needs "
                            "dynamic_grid = [tile, programs] to size its grid";
  if (!dynamic && dynamicGrid)
    return emitOpError() << "has dynamic_grid but no tensor with a dynamic "
                            "extent (`?`)";
  // [0, 0]: every program loops over the extent, and `grid` holds at every
  // size.
  bool looped = dynamicGrid && dynamicGrid->size() == 2 &&
                (*dynamicGrid)[0] == 0 && (*dynamicGrid)[1] == 0;
  if (dynamicGrid && !looped &&
      (dynamicGrid->size() != 2 ||
       llvm::any_of(*dynamicGrid, [](int64_t g) { return g < 1 || g > 2147483647; })))
    return emitOpError() << "dynamic_grid " << shapeText(*dynamicGrid)
                         << " must hold a tile and a program count in [1, 2^31), "
                            "or be [0, 0]";
  return success();
}

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Operation *callee =
      symbols.lookupNearestSymbolFrom(*this, getCalleeAttr());
  if (!isa_and_nonnull<ModuleOp>(callee))
    return emitOpError() << "callee " << getCalleeAttr()
                         << " must name a module that holds the kernel's "
                            "tt.func";
  return success();
}

#define GET_OP_CLASSES
#include "KgOps.cpp.inc"
