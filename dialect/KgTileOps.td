//===- KgTileOps.td - kg ops of tiled kernels -----------------------------===//
//
// Tile ops make up the body of a kernel in tiled form. One program runs per
// grid point; it names its tiles by their offsets into memref buffers.
// A tile has a logical shape: `kg-tile` may pick shapes that are not powers
// of two or that run past the end of a buffer, and `kg-pad-mask` then pads
// them to powers of two and masks every access that a partial tile makes.
//
//===----------------------------------------------------------------------===//

#ifndef KG_TILE_OPS_TD
#define KG_TILE_OPS_TD

include "KgBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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

def Kg_TileLoadOp : Kg_Op<"tile_load", [AttrSizedOperandSegments,
    OptionalTypesMatchWith<"mask has the shape of the tile", "result", "mask",
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

    Example:

    ```mlir
    %t = kg.tile_load %x[%row, %c0] mask %m padding 0.0 : memref<17x1000xf32> -> tensor<16x1024xf32>
    ```
  }];
  let arguments = (ins Arg<Kg_Buffer, "the buffer read", [MemRead]>:$src,
                       Variadic<I32>:$offsets, Optional<Kg_MaskTile>:$mask,
                       OptionalAttr<F64Attr>:$padding);
  let results = (outs Kg_Tensor:$result);
  let assemblyFormat = "$src `[` $offsets `]` (`mask` $mask^)? "
                       "(`padding` $padding^)? attr-dict `:` type($src) "
                       "`->` type($result)";
  let hasVerifier = 1;
}

def Kg_TileStoreOp : Kg_Op<"tile_store", [AttrSizedOperandSegments,
    OptionalTypesMatchWith<"mask has the shape of the tile", "value", "mask",
        "::mlir::cast<::mlir::RankedTensorType>($_self).clone("
        "::mlir::IntegerType::get($_self.getContext(), 1))">]> {
  let summary = "writes a tile into a buffer";
  let description = [{
    Writes `value` into `dst` with its first element at `offsets` (one i32
    per buffer dimension). Lanes whose `mask` is false are not written.
    Without a mask every lane must lie inside the buffer.

    Example:

    ```mlir
    kg.tile_store %t, %out[%row, %c0] mask %m : tensor<16x1024xf16>, memref<17x1000xf16>
    ```
  }];
  let arguments = (ins Kg_Tensor:$value,
                       Arg<Kg_Buffer, "the buffer written", [MemWrite]>:$dst,
                       Variadic<I32>:$offsets, Optional<Kg_MaskTile>:$mask);
  let assemblyFormat = "$value `,` $dst `[` $offsets `]` (`mask` $mask^)? "
                       "attr-dict `:` type($value) `,` type($dst)";
  let hasVerifier = 1;
}

def Kg_TileMaskOp : Kg_Op<"tile_mask", [Pure]> {
  let summary = "which lanes of a tile fall inside a box";
  let description = [{
    Lane `l` of the result is true when `lower[d] <= offsets[d] + l[d] <
    upper[d]` holds for every dimension `d`. `kg-pad-mask` builds the masks
    of partial tiles from it; a concat reads each of its inputs under the
    mask of that input's window.

    Example:

    ```mlir
    %m = kg.tile_mask [%row, %c0] lower [0, 0] upper [17, 1000] : tensor<16x1024xi1>
    ```
  }];
  let arguments = (ins Variadic<I32>:$offsets, DenseI64ArrayAttr:$lower,
                       DenseI64ArrayAttr:$upper);
  let results = (outs Kg_MaskTile:$mask);
  let assemblyFormat = "` ` `[` $offsets `]` `lower` $lower `upper` $upper "
                       "attr-dict `:` type($mask)";
  let hasVerifier = 1;
}

def Kg_TileDotOp : Kg_Op<"tile_dot", [Pure]> {
  let summary = "tile matrix product accumulated in f32";
  let description = [{
    Returns `acc + a @ b` for tiles `a` (M x K), `b` (K x N) and an f32
    accumulator `acc` (M x N), as `tl.dot` does. `kg-legalize-dot` makes
    every dot one that Triton's tensor cores take: M, N and K of at least
    16, operands of f16, bf16, the 8-bit floats, or f32 with a `precision`.

    Example:

    ```mlir
    %d = kg.tile_dot %a, %b, %acc : (tensor<64x32xf16>, tensor<32x128xf16>, tensor<64x128xf32>) -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Kg_Tensor:$a, Kg_Tensor:$b,
                       StaticShapeTensorOf<[F32]>:$acc,
                       OptionalAttr<Kg_Precision>:$precision);
  let results = (outs StaticShapeTensorOf<[F32]>:$out);
  let assemblyFormat = "$a `,` $b `,` $acc (`precision` `=` $precision^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // KG_TILE_OPS_TD
