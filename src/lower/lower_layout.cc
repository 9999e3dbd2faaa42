// Lowering of Const and the layout ops: Reshape, Transpose, BroadcastTo, Concat, Slice,
// Pad, OneHot. All are pure index maps (gathers) that the schedulers inline.
//
// Reads that depend on a select (Concat, Pad) clamp their index into the operand's
// range: bounds inference does not look through select, and an unclamped index would
// make Halide require (and check) a larger region of an input buffer than exists.
#include <cstring>

#include "lower/lower_ops.h"

namespace braze {
namespace lower {

using Halide::Expr;

Value LowerConst(LoweringContext& ctx, const std::string& name, const HostTensor& value) {
  if (value.num_elements() == 1) {
    // A literal lets Halide fold it (scalars from operators are the common case).
    return Fill(value.dtype(), value.shape(), value.GetDouble(0));
  }
  // When JIT-compiling, Halide derives a constant buffer's alignment from its address.
  // Halide 14 shifts a strided vector load near a buffer's end back by an element yet
  // keeps the unshifted alignment, so a well-aligned constant got aligned 64-byte loads
  // from misaligned addresses: a SIGSEGV (docs/HALIDE14.md, braze-fuzz seed 72558). So
  // the data starts one element into its allocation (a crop shares it): Halide then
  // assumes element alignment, as for every input buffer. One flat dimension keeps the
  // crop contiguous; the index is the row-major offset.
  const int64_t n = value.num_elements();
  Halide::Buffer<> buffer(HalideType(value.dtype()), {static_cast<int>(n + 1)},
                          ctx.UniqueName(name + "_data"));
  buffer.crop(0, 1, static_cast<int>(n));  // the allocation stays owned by the buffer
  buffer.translate(0, -1);
  std::memcpy(buffer.data(), value.raw_data(), value.num_bytes());
  // Written on the host: a GPU pipeline's first run must upload it. Without the flag,
  // Halide allocated the device copy and never filled it (Const on OpenCL read garbage).
  buffer.set_host_dirty(true);
  const Shape shape = value.shape();
  Value v = Define(ctx, name, value.dtype(), shape, [&](const std::vector<Expr>& index) {
    Expr flat = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      flat = d == 0 ? index[d] : flat * static_cast<int>(shape[d]) + index[d];
    }
    return buffer(flat);
  });
  v.const_value = &value;
  return v;
}

Value LowerReshape(LoweringContext& ctx, const std::string& name, const Value& x,
                   const TensorType& out) {
  // Ignoring size-1 dims, split both shapes into the shortest runs of dims with equal
  // products; within a run, the input index is the run's flat output index unflattened.
  // A run of one dim on each side maps directly, so adding or dropping unit dims, or
  // merging/splitting a few dims, costs no division in the common cases.
  std::vector<int> in_dims, out_dims;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (x.shape[d] != 1) in_dims.push_back(static_cast<int>(d));
  }
  for (size_t d = 0; d < out.shape.size(); ++d) {
    if (out.shape[d] != 1) out_dims.push_back(static_cast<int>(d));
  }
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    std::vector<Expr> in_index(x.shape.size(), Expr(0));
    size_t i = 0, o = 0;
    while (i < in_dims.size() && o < out_dims.size()) {
      const size_t i0 = i, o0 = o;
      int64_t pi = x.shape[in_dims[i++]];
      int64_t po = out.shape[out_dims[o++]];
      while (pi != po) {
        if (pi < po) {
          pi *= x.shape[in_dims[i++]];
        } else {
          po *= out.shape[out_dims[o++]];
        }
      }
      if (i - i0 == 1 && o - o0 == 1) {
        in_index[in_dims[i0]] = index[out_dims[o0]];
        continue;
      }
      Expr flat = 0;
      for (size_t k = o0; k < o; ++k) {
        flat = flat * static_cast<int>(out.shape[out_dims[k]]) + index[out_dims[k]];
      }
      int64_t stride = 1;
      for (size_t k = i; k-- > i0;) {
        const int dim = static_cast<int>(x.shape[in_dims[k]]);
        Expr e = stride == 1 ? flat : flat / static_cast<int>(stride);
        if (k != i0) e = e % dim;
        in_index[in_dims[k]] = e;
        stride *= dim;
      }
    }
    return At(x, in_index);
  });
}

bool ReshapeKeepsSymbols(const Value& x, const Shape& out_shape, const std::vector<int>& out_sym) {
  // The runs LowerReshape forms (size-1 dims aside; symbolic dims are never 1).
  auto out_symbol = [&](size_t d) { return d < out_sym.size() ? out_sym[d] : -1; };
  std::vector<size_t> in_dims, out_dims;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (x.shape[d] != 1) in_dims.push_back(d);
  }
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (out_shape[d] != 1) out_dims.push_back(d);
  }
  size_t i = 0, o = 0;
  while (i < in_dims.size() && o < out_dims.size()) {
    const size_t i0 = i, o0 = o;
    int64_t pi = x.shape[in_dims[i++]];
    int64_t po = out_shape[out_dims[o++]];
    while (pi != po && i <= in_dims.size() && o <= out_dims.size()) {
      if (pi < po) {
        if (i == in_dims.size()) return false;
        pi *= x.shape[in_dims[i++]];
      } else {
        if (o == out_dims.size()) return false;
        po *= out_shape[out_dims[o++]];
      }
    }
    if (i - i0 == 1 && o - o0 == 1) {
      if (SymbolOf(x, in_dims[i0]) != out_symbol(out_dims[o0])) return false;
      continue;
    }
    for (size_t k = i0; k < i; ++k) {
      if (SymbolOf(x, in_dims[k]) >= 0) return false;
    }
    for (size_t k = o0; k < o; ++k) {
      if (out_symbol(out_dims[k]) >= 0) return false;
    }
  }
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (out_shape[d] == 1 && out_symbol(d) >= 0) return false;
  }
  return true;
}

Value LowerTranspose(LoweringContext& ctx, const std::string& name, const TransposeAttrs& attrs,
                     const Value& x, const TensorType& out) {
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    std::vector<Expr> in_index(index.size());
    for (size_t i = 0; i < index.size(); ++i) in_index[attrs.perm[i]] = index[i];
    return At(x, in_index);
  });
}

Value LowerBroadcastTo(LoweringContext& ctx, const std::string& name, const Value& x,
                       const TensorType& out) {
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    return At(x, BroadcastIndex(x.shape, out.shape, index));
  });
}

Value LowerConcat(LoweringContext& ctx, const std::string& name, const ConcatAttrs& attrs,
                  const std::vector<Value>& xs, const TensorType& out) {
  const int axis = attrs.axis;
  struct Piece {
    const Value* value;
    int offset;
    int extent;
  };
  std::vector<Piece> pieces;
  int offset = 0;
  for (const Value& x : xs) {
    const int extent = static_cast<int>(x.shape[axis]);
    if (NumElements(x.shape) > 0) pieces.push_back({&x, offset, extent});
    offset += extent;
  }
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    auto read = [&](const Piece& p) {
      std::vector<Expr> in_index = index;
      in_index[axis] = Halide::clamp(index[axis] - p.offset, 0, p.extent - 1);
      return At(*p.value, in_index);
    };
    Expr result = read(pieces.back());
    for (size_t i = pieces.size() - 1; i-- > 0;) {
      result = Halide::select(index[axis] < pieces[i].offset + pieces[i].extent, read(pieces[i]),
                              result);
    }
    return result;
  });
}

Value LowerSlice(LoweringContext& ctx, const std::string& name, const SliceAttrs& attrs,
                 const Value& x, const TensorType& out) {
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    std::vector<Expr> in_index;
    for (size_t d = 0; d < index.size(); ++d) {
      in_index.push_back(index[d] + static_cast<int>(attrs.begin[d]));
    }
    return At(x, in_index);
  });
}

Value LowerPad(LoweringContext& ctx, const std::string& name, const PadAttrs& attrs, const Value& x,
               const TensorType& out) {
  if (NumElements(x.shape) == 0) return Fill(out.dtype, out.shape, attrs.value);
  const Expr fill = TypedConst(out.dtype, attrs.value);
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    std::vector<Expr> in_index;
    Expr inside = Halide::Internal::const_true();
    for (size_t d = 0; d < index.size(); ++d) {
      const int lo = static_cast<int>(attrs.paddings[d].first);
      const int extent = static_cast<int>(x.shape[d]);
      if (lo == 0 && attrs.paddings[d].second == 0) {
        in_index.push_back(index[d]);
        continue;
      }
      inside = inside && index[d] >= lo && index[d] < lo + extent;
      in_index.push_back(Halide::clamp(index[d] - lo, 0, extent - 1));
    }
    return Halide::select(inside, At(x, in_index), fill);
  });
}

Value LowerOneHot(LoweringContext& ctx, const std::string& name, const OneHotAttrs& attrs,
                  const Value& indices, const TensorType& out) {
  const Expr on = TypedConst(out.dtype, attrs.on_value);
  const Expr off = TypedConst(out.dtype, attrs.off_value);
  return Define(ctx, name, out.dtype, out.shape, [&](const std::vector<Expr>& index) {
    const std::vector<Expr> in_index(index.begin(), index.end() - 1);
    return Halide::select(At(indices, in_index) == index.back(), on, off);
  });
}

}  // namespace lower
}  // namespace braze
