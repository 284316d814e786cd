//===- KgTileOps.td - kg ops of tiled kernels -----------------------------===//
//
// Tile ops make up the body of a kernel in tiled form. One program runs per
// grid point; it names its tiles by their offsets into memref buffers.
// A tile has a logical shape: `kg-tile` may pick shapes that are not powers
// of two or that run past the end of a buffer, and `kg-pad-mask` then pads
// them to powers of two and masks every access that a partial tile makes.
// `kg.launch` is what remains of a kernel in the graph once its tile program
// has become TTIR.
//
//===----------------------------------------------------------------------===//

#ifndef KG_TILE_OPS_TD
#define KG_TILE_OPS_TD

include "KgBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"

def Kg_ProgramIdOp : Kg_Op<"program_id", [Pure]> {
  let summary = "the index of this program along one grid axis";
  let description = [{
    Returns the coordinate of the running program along grid axis `axis`
    (0, 1 or 2), as `tl.program_id` does. Only valid inside a tiled kernel.

    Example:

    ```mlir
    %pid = kg.program_id 0 : i32
    ```
  }];
  let arguments = (ins I32Attr:$axis);
  let results = (outs I32:$id);
  let assemblyFormat = "$axis attr-dict `:` type($id)";
  let hasVerifier = 1;
}

def Kg_ScalarArgOp : Kg_Op<"scalar_arg", [Pure]> {
  let summary = "an i32 argument of the kernel, passed at launch";
  let description = [{
    Returns the `index`th scalar argument of the kernel: a tiled kernel may
    take i32 values (extents, split counts) after its buffers, listed in its
    `scalars` attribute (`scalars = array<i64: ...>`), which the launch
    passes in that order after the pointers. `index` must be below the
    number of scalars.

    Example:

    ```mlir
    %n = kg.scalar_arg 0 : i32
    ```
  }];
  let arguments = (ins I32Attr:$index);
  let results = (outs I32:$value);
  let assemblyFormat = "$index attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Kg_TileRangeOp : Kg_Op<"tile_range", [Pure]> {
  let summary = "the positions of a tile's lanes along one axis";
  let description = [{
    Lane `l` of the result holds `offset + l[axis]`: the index along
    iteration axis `axis` of each lane of a tile whose first lane sits at
    `offset`. Every dimension of the result but `axis` has size 1. It is
    the tile form of `kg.iota`, as `tl.arange` plus an offset is in Triton.

    Example:

    ```mlir
    %cols = kg.tile_range %col axis 1 : tensor<1x128xi32>
    ```
  }];
  let arguments = (ins I32:$offset, I64Attr:$axis);
  let results = (outs StaticShapeTensorOf<[I32]>:$result);
  let assemblyFormat = "$offset `axis` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kg_TileLoadOp : Kg_Op<"tile_load", [AttrSizedOperandSegments,
    OptionalTypesMatchWith<"mask is a tensor of i1 with the shape of the tile", "result", "mask",
        "::mlir::cast<::mlir::RankedTensorType>($_self).clone("
        "::mlir::IntegerType::get($_self.getContext(), 1))">]> {
  let summary = "reads a tile of a buffer";
  let description = [{
    Reads the tile of `src` whose first element sits at `offsets` (one i32
    per buffer dimension); the tile's shape is the result shape, of the
    buffer's rank. Lanes whose `mask` is false are not read and hold
    `padding` (unspecified when `padding` is absent). Without a mask every
    lane must lie inside the buffer: `kg-pad-mask` adds the masks that
    partial tiles need and picks the padding that their consumers can
    ignore (0 before a sum or a dot, -inf before a max).

    `tma` asks for the tile to be read by the tensor memory accelerator
    (Hopper's bulk tensor copy, through a Triton tensor descriptor), which
    fills lanes outside the buffer with zeros: kg-tile sets it on a
    matmul's operand loads when the kernel's `tma` knob is on. It needs a
    buffer whose smallest nonzero stride is 1 and whose other strides and
    offset are multiples of 16 bytes; a masked `tma` load's padding is 0.

    Example:

    ```mlir
    %t = kg.tile_load %x[%row, %c0] mask %m padding 0.0 : memref<17x1000xf32> -> tensor<16x1024xf32>
    %a = kg.tile_load %w[%row, %k] {tma} : memref<256x512xf16> -> tensor<128x64xf16>
    ```
  }];
  let arguments = (ins Arg<Kg_Buffer, "the buffer read", [MemRead]>:$src,
                       Variadic<I32>:$offsets, Optional<Kg_MaskTile>:$mask,
                       OptionalAttr<F64Attr>:$padding,
                       UnitAttr:$tma);
  let results = (outs Kg_Tile:$result);
  let assemblyFormat = "$src `[` $offsets `]` (`mask` $mask^)? "
                       "(`padding` $padding^)? attr-dict `:` type($src) "
                       "`->` type($result)";
  let hasVerifier = 1;
}

def Kg_TileStoreOp : Kg_Op<"tile_store", [AttrSizedOperandSegments,
    OptionalTypesMatchWith<"mask is a tensor of i1 with the shape of the tile", "value", "mask",
        "::mlir::cast<::mlir::RankedTensorType>($_self).clone("
        "::mlir::IntegerType::get($_self.getContext(), 1))">]> {
  let summary = "writes a tile into a buffer";
  let description = [{
    Writes `value` into `dst` with its first element at `offsets` (one i32
    per buffer dimension). Lanes whose `mask` is false are not written.
    Without a mask every lane must lie inside the buffer. `tma` asks for a
    bulk tensor store through a Triton tensor descriptor, which drops the
    lanes outside the buffer; its buffer rules are those of
    `kg.tile_load`'s `tma`.

    Example:

    ```mlir
    kg.tile_store %t, %out[%row, %c0] mask %m : tensor<16x1024xf16>, memref<17x1000xf16>
    kg.tile_store %c, %y[%row, %col] {tma} : tensor<128x128xf16>, memref<256x256xf16>
    ```
  }];
  let arguments = (ins Kg_Tile:$value,
                       Arg<Kg_Buffer, "the buffer written", [MemWrite]>:$dst,
                       Variadic<I32>:$offsets, Optional<Kg_MaskTile>:$mask,
                       UnitAttr:$tma);
  let assemblyFormat = "$value `,` $dst `[` $offsets `]` (`mask` $mask^)? "
                       "attr-dict `:` type($value) `,` type($dst)";
  let hasVerifier = 1;
}

def Kg_TileGatherOp : Kg_Op<"tile_gather", [AttrSizedOperandSegments,
    OptionalTypesMatchWith<"mask is a tensor of i1 with the shape of the tile", "result", "mask",
        "::mlir::cast<::mlir::RankedTensorType>($_self).clone("
        "::mlir::IntegerType::get($_self.getContext(), 1))">]> {
  let summary = "reads a tile of a buffer at listed positions along one dimension";
  let description = [{
    Reads a tile of `src` as `kg.tile_load` does, except along dimension
    `dim`: there lane `l` reads position `offsets[dim] + indices[l]`, where
    `indices` (i32 or i64, of the tile's rank) broadcasts to the tile's
    shape. Along every other dimension `d`, lane `l` reads `offsets[d] +
    l[d]`. This is the indirect load of a `kg.gather` (an embedding row per
    token). Lanes whose `mask` is false are not read and hold `padding`
    (unspecified when absent); `kg-pad-mask` masks the lanes past the
    buffer along the other dimensions. Along `dim` the indices must lie
    inside the buffer (lanes padded past the iteration hold the index tile's
    padding, 0).

    Example:

    ```mlir
    %rows = kg.tile_gather %table[%c0, %col] indices %ids dim 0 : memref<2048x512xf16>, tensor<16x1xi64> -> tensor<16x128xf16>
    ```
  }];
  let arguments = (ins Arg<Kg_Buffer, "the buffer read", [MemRead]>:$src,
                       Variadic<I32>:$offsets, Kg_IndexTensor:$indices, I64Attr:$dim,
                       Optional<Kg_MaskTile>:$mask, OptionalAttr<F64Attr>:$padding);
  let results = (outs Kg_Tile:$result);
  let assemblyFormat = "$src `[` $offsets `]` `indices` $indices `dim` $dim "
                       "(`mask` $mask^)? (`padding` $padding^)? attr-dict `:` "
                       "type($src) `,` type($indices) `->` type($result)";
  let hasVerifier = 1;
}

def Kg_TileMaskOp : Kg_Op<"tile_mask", [Pure, AttrSizedOperandSegments]> {
  let summary = "which lanes of a tile fall inside a box";
  let description = [{
    Lane `l` of the result is true when `lower[d] <= offsets[d] + l[d] <
    upper[d]` holds for every dimension `d`, and, for each dimension listed
    in `dynamic_dims`, `offsets[d] + l[d]` is also below the matching
    `dynamic_upper` operand: a bound known only at run time (the size of a
    dynamic extent). `kg-pad-mask` builds the masks of partial tiles from
    it; a concat reads each of its inputs under the mask of that input's
    window.

    Example:

    ```mlir
    %m = kg.tile_mask [%row, %c0] lower [0, 0] upper [17, 1000] : tensor<16x1024xi1>
    %r = kg.tile_mask [%row, %c0] lower [0, 0] upper [2147483647, 1000] dynamic_upper [0] (%rows) : tensor<16x1024xi1>
    ```
  }];
  let arguments = (ins Variadic<I32>:$offsets, DenseI64ArrayAttr:$lower,
                       DenseI64ArrayAttr:$upper,
                       OptionalAttr<DenseI64ArrayAttr>:$dynamic_dims,
                       Variadic<I32>:$dynamic_upper);
  let results = (outs Kg_MaskTile:$mask);
  let assemblyFormat = "` ` `[` $offsets `]` `lower` $lower `upper` $upper "
                       "(`dynamic_upper` $dynamic_dims^ `(` $dynamic_upper `)`)? "
                       "attr-dict `:` type($mask)";
  let hasVerifier = 1;
}

def Kg_TileDotOp : Kg_Op<"tile_dot", [Pure]> {
  let summary = "tile matrix product accumulated in f32";
  let description = [{
    Returns `acc + a @ b`, as `tl.dot` does, for tiles laid out in the
    iteration space of a matmul kernel, whose last three axes are M, K and
    N: `a` is `[..., M, K, 1]`, `b` is `[..., 1, K, N]` and the f32
    accumulator `acc` is `[..., M, 1, N]`; every leading axis is 1.
    `kg-legalize-dot` makes every dot one that Triton's tensor cores take:
    M, N and K of at least 16, operands of f16, bf16, the 8-bit floats, or
    f32 with a `precision`. Like `kg.matmul`, it takes `ieee` and `tf32`
    on f32 tiles only and `fast_accum` on 8-bit float tiles only.

    `dims = [m, k, n]` names other axes as M, K and N (three distinct axes
    of the tiles, any order): `a` then spans M and K, `b` K and N, `acc`
    M and N, and every other axis is 1. An attention kernel iterates over
    (..., queries, keys, head dim) and takes both Q K^T (M = queries,
    K = head dim, N = keys: `dims = [r-3, r-1, r-2]`) and P V (the
    default) in one space.

    Example:

    ```mlir
    %d = kg.tile_dot %a, %b, %acc : (tensor<64x32x1xf16>, tensor<1x32x128xf16>, tensor<64x1x128xf32>) -> tensor<64x1x128xf32>
    %s = kg.tile_dot %q, %k, %zero {dims = array<i64: 0, 2, 1>} : (tensor<64x1x128xf16>, tensor<1x32x128xf16>, tensor<64x32x1xf32>) -> tensor<64x32x1xf32>
    ```
  }];
  let arguments = (ins Kg_Tile:$a, Kg_Tile:$b,
                       StaticShapeTensorOf<[F32]>:$acc,
                       OptionalAttr<Kg_Precision>:$precision,
                       OptionalAttr<DenseI64ArrayAttr>:$dims);
  let results = (outs StaticShapeTensorOf<[F32]>:$out);
  let assemblyFormat = "$a `,` $b `,` $acc (`precision` `=` $precision^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kg_TileSelectOp : Kg_Op<"tile_select", [Pure]> {
  let summary = "picks lanes of two tiles by a mask, with broadcasting";
  let description = [{
    Lane `l` of the result is `true_value[l]` where `mask[l]` holds and
    `false_value[l]` elsewhere, after broadcasting the three operands to a
    common shape as numpy does. The two values share an element type.
    `kg-pad-mask` uses it to give the lanes outside the buffer the neutral
    value of a reduction; a concat picks its inputs with it.

    Example:

    ```mlir
    %s = kg.tile_select %m, %x, %zero : (tensor<1x1024xi1>, tensor<16x1024xf32>, tensor<1x1xf32>) -> tensor<16x1024xf32>
    ```
  }];
  let arguments = (ins Kg_MaskTile:$mask, Kg_Tile:$true_value,
                       Kg_Tile:$false_value);
  let results = (outs Kg_Tile:$out);
  let assemblyFormat = "$mask `,` $true_value `,` $false_value attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Kg_LaunchOp : Kg_Op<"launch",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs a Triton kernel on tensors";
  let description = [{
    What `convert-kg-to-ttir` leaves of a kernel in the graph: a launch of
    the public `tt.func` held by the module `callee` (a sibling of the graph
    function) on a `grid` of programs, with Triton's `num_warps` and
    `num_stages`. The kernel takes one pointer per input and then one per
    result, in order, then the i32 values of `scalars` (when present); the
    results are fresh tensors that it fills.

    A launch on tensors with a dynamic extent (`?`, the size each call
    gives) carries `dynamic_grid = [tile, programs]`: its grid along x is
    `ceil(size / tile) * programs` at the call (`grid` holds it at kgc's
    planning size), and the kernel takes the size as one more i32 after
    the scalars. `dynamic_grid = [0, 0]` launches on `grid` at every size:
    each program loops over the extent (attention over a growing cache's
    keys), and still takes the size.

    Example:

    ```mlir
    %y = kg.launch @softmax_0(%x) grid [17, 1, 1] num_warps 4 num_stages 1 : (tensor<17x1000xf16>) -> tensor<17x1000xf16>
    %z = kg.launch @softmax_1(%w) grid [64, 1, 1] num_warps 8 num_stages 1 {dynamic_grid = array<i64: 4, 1>} : (tensor<?x1000xf16>) -> tensor<?x1000xf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, Variadic<Kg_Tensor>:$inputs,
                       DenseI64ArrayAttr:$grid, I64Attr:$num_warps,
                       I64Attr:$num_stages,
                       OptionalAttr<DenseI64ArrayAttr>:$scalars,
                       OptionalAttr<DenseI64ArrayAttr>:$dynamic_grid);
  let results = (outs Variadic<Kg_Tensor>:$outputs);
  let assemblyFormat = "$callee `(` $inputs `)` `grid` $grid `num_warps` "
                       "$num_warps `num_stages` $num_stages attr-dict `:` "
                       "functional-type($inputs, results)";
  let hasVerifier = 1;
}

#endif // KG_TILE_OPS_TD
