// Overloaded{lambdas...}: one callable made of several lambdas, for std::visit over a
// variant such as Attrs (braze/graph.h), one lambda per alternative:
//
//   std::visit(Overloaded{[](const NoAttrs&) { ... }, [](const CastAttrs& a) { ... }}, attrs);
//
// In ir, the lowest layer, so that every layer that visits Attrs (lower's cluster text,
// compile's cluster key) shares this one definition.
#ifndef BRAZE_IR_OVERLOADED_H_
#define BRAZE_IR_OVERLOADED_H_

namespace braze {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace braze

#endif  // BRAZE_IR_OVERLOADED_H_
