//===- KgBase.td - the kg dialect, its enums and type constraints ---------===//
//
// The `kg` dialect describes kernel graphs: tensor programs built from
// matmuls, reductions, normalizations and elementwise ops. It has two levels
// that share one dialect:
//
//  * graph ops (KgGraphOps.td) work on whole tensors with static shapes; a
//    `kg.kernel` groups graph ops into the unit that becomes one GPU kernel;
//  * tile ops (KgTileOps.td) appear once a kernel is tiled: they load, store
//    and multiply tiles of memref-typed buffers, one program per tile.
//
//===----------------------------------------------------------------------===//

#ifndef KG_BASE_TD
#define KG_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

def Kg_Dialect : Dialect {
  let name = "kg";
  let cppNamespace = "::kgc::kg";
  let summary = "Kernel graphs: fused tensor programs that lower to Triton.";
  let description = [{
    A kernel graph is a `func.func` whose body is made of `kg` ops on ranked
    tensors. An extent is static or dynamic (`?`): a function's dynamic
    extents all stand for one size, given by each call (the number of tokens,
    say), so that one graph describes every such size. kgc partitions the graph into `kg.kernel`
    ops, tiles each kernel, pads its tiles to powers of two with masks,
    legalizes its dots and lowers it to Triton IR (TTIR).
  }];
}

//===----------------------------------------------------------------------===//
// Element types and tensor constraints
//===----------------------------------------------------------------------===//

// Types that elementwise math, reductions and normalizations accept.
def Kg_Float : AnyTypeOf<[F32, F16, BF16], "f32, f16 or bf16">;

// 8-bit floats: storage and matmul inputs only.
def Kg_Float8 : AnyTypeOf<[F8E4M3FN, F8E5M2], "f8E4M3FN or f8E5M2">;

// Integers: positions, indices, counts. Signless in MLIR, signed in kgc's
// semantics (torch.int32, torch.int64); arithmetic wraps around.
def Kg_Int : AnyTypeOf<[I32, I64], "i32 or i64">;

// Types of integer and float arithmetic (add, sub, mul, maximum, minimum,
// neg, abs).
def Kg_Numeric : AnyTypeOf<[F32, F16, BF16, I32, I64],
                           "f32, f16, bf16, i32 or i64">;

// Types a comparison, a select or a constant take: every element type but
// the 8-bit floats. i1 is torch.bool.
def Kg_Value : AnyTypeOf<[F32, F16, BF16, I1, I32, I64],
                         "f32, f16, bf16, i1, i32 or i64">;

// Every element type a kg tensor may hold.
def Kg_Element : AnyTypeOf<[F32, F16, BF16, F8E4M3FN, F8E5M2, I1, I32, I64],
                           "f32, f16, bf16, f8E4M3FN, f8E5M2, i1, i32 or i64">;

// Graph tensors are ranked; an extent is a number or `?`, a dynamic extent
// whose size each call gives (all the `?` of one function are one size).
def Kg_FloatTensor : RankedTensorOf<[Kg_Float]>;
def Kg_NumericTensor : RankedTensorOf<[Kg_Numeric]>;
def Kg_ValueTensor : RankedTensorOf<[Kg_Value]>;
def Kg_BoolTensor : RankedTensorOf<[I1]>;
def Kg_IndexTensor : RankedTensorOf<[Kg_Int]>;
def Kg_Tensor : RankedTensorOf<[Kg_Element]>;
// Ops whose result is made from attributes alone (constants, counts): their
// extents cannot come from a call, so they are static.
def Kg_StaticNumericTensor : StaticShapeTensorOf<[Kg_Numeric]>;
def Kg_StaticValueTensor : StaticShapeTensorOf<[Kg_Value]>;
// What a launch takes and makes: the tiler plans static extents only.
def Kg_StaticTensor : StaticShapeTensorOf<[Kg_Element]>;

// Tiles are tensors of static shape (tile sizes are compile-time constants);
// masks are tensors of i1.
def Kg_Tile : StaticShapeTensorOf<[Kg_Element]>;
def Kg_MaskTile : StaticShapeTensorOf<[I1]>;

// Buffers of a tiled kernel: an extent may be dynamic (`?`), as in the
// kernel's tensors; a tile program reads its size with `memref.dim`.
def Kg_Buffer : MemRefOf<[Kg_Element]>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kg_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the Gaussian CDF", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::kgc::kg";
}

def Kg_ReduceKind : I32EnumAttr<"ReduceKind", "the combiner of a reduction", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"max", 1>,
      I32EnumAttrCase<"min", 2>,
      I32EnumAttrCase<"mean", 3>
    ]> {
  let cppNamespace = "::kgc::kg";
}

def Kg_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "how kg.cmp compares its operands", [
      I32EnumAttrCase<"eq", 0>,
      I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>,
      I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>,
      I32EnumAttrCase<"ge", 5>
    ]> {
  let cppNamespace = "::kgc::kg";
}

def Kg_ScatterMode : I32EnumAttr<"ScatterMode",
    "how kg.scatter combines a source row with the destination's", [
      I32EnumAttrCase<"assign", 0>,
      I32EnumAttrCase<"add", 1>
    ]> {
  let cppNamespace = "::kgc::kg";
}

// How a matmul uses the tensor cores. f32 operands take `ieee` (exact f32
// products and sums) or `tf32` (operands rounded to a 10-bit mantissa).
// 8-bit float operands take `fast_accum`: the tensor cores add the products
// of the whole k loop into the accumulator themselves, with their narrower
// internal additions, where by default each k step's products (at most 128)
// are summed by the tensor cores and that sum is added into the accumulator
// in full f32. It is Triton's default for 8-bit dots on sm_90, cuBLAS's
// fast-accumulation mode and torch._scaled_mm's use_fast_accum=True:
// faster, and less exact as K grows.
def Kg_Precision : I32EnumAttr<"Precision",
    "how a matmul uses the tensor cores", [
      I32EnumAttrCase<"ieee", 0>,
      I32EnumAttrCase<"tf32", 1>,
      I32EnumAttrCase<"fast_accum", 2>
    ]> {
  let cppNamespace = "::kgc::kg";
}

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

class Kg_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kg_Dialect, mnemonic, traits>;

// An elementwise op: element i of its result depends only on element i of
// each operand (after broadcasting). kgc's op table (python/kgc/ops.py) is
// generated from the defs of this class, so a new elementwise op needs only
// its def here, its torch reference and its TTIR lowering in that table.
class Kg_ElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Kg_Op<mnemonic, traits>;

#endif // KG_BASE_TD
