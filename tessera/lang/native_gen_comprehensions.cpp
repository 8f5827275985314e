// Gen (native_gen.hpp): lists built by comprehensions and concatenation.
// A comprehension is the translator's loop appending to a hidden list
// (`acc = list(); while(...) acc = append(acc, expr); acc`), compiled by
// the loop code with list reads and appends; what is here is `a + b` of
// two lists (`row + [0]`, `[0] + row`) and the kinds of the items such
// lists give.
#include "tessera/lang/native_gen.hpp"

#include <algorithm>

#include "tessera/lang/native_comprehensions.hpp"

namespace tessera::native_gen {

bool Gen::list_expr(const FNode& n) const {
  if (n.op == Op::NewList) return true;
  if (n.op == Op::Var) {
    const auto r = static_cast<size_t>(n.reg);
    if (dict_reg[r] || str_reg(n.reg)) return false;
    return kind[r] == Reg::Obj || (kind[r] == Reg::Undef && regs[r].k == Reg::Obj);
  }
  return n.op == Op::Binary && n.spec && n.spec->name == "add" && n.kids.size() == 2 &&
         list_expr(n.kids[0]) && list_expr(n.kids[1]);
}

CV Gen::list_concat(const FNode& n) {
  CV x = eval_any(n.kids[0]);
  CV y = eval_any(n.kids[1]);
  if (x.k != Reg::Obj || y.k != Reg::Obj) throw Refuse{"'+' of a list and what is not a list"};
  auto* ft = llvm::FunctionType::get(i64, {i8p, i64, i64}, false);
  llvm::Value* obj = b.CreateCall(
      ft, fptr(reinterpret_cast<void*>(&native_list_concat), ft), {cptr, x.v, y.v});
  bail_if(b.CreateICmpSLT(obj, b.getInt64(0)));
  b.CreateStore(b.getTrue(), made_any);
  count(n.counter);
  return CV{Reg::Obj, obj};
}

int Gen::expr_item_kind(const FNode& n) const {
  switch (n.op) {
    case Op::Var:
      return item_kind[static_cast<size_t>(n.reg)];
    case Op::NewList:
      for (const FNode& k : n.kids)
        if (k.op == Op::Const && is_scalar(k.constant.k)) return k.constant.k;
      return -1;
    case Op::Binary: {
      if (!n.spec || n.spec->name != "add" || n.kids.size() != 2) return -1;
      const int a = expr_item_kind(n.kids[0]);
      return a >= 0 ? a : expr_item_kind(n.kids[1]);
    }
    case Op::Block:
      return n.kids.empty() ? -1 : expr_item_kind(n.kids.back());
    default:
      return is_iterate(n) ? expr_item_kind(n.kids[0]) : -1;
  }
}

}  // namespace tessera::native_gen
