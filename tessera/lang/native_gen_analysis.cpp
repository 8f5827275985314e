// Gen (native_gen.hpp): what the loop's tree shows before any code is
// emitted: the registers that may hold another array, hold lists (and
// which of them stay fixed), iterate without a copy, or hold only int
// constants; and the uses of each variable.
#include "tessera/lang/native_gen.hpp"

#include <functional>
#include <set>
#include <vector>

namespace tessera::native_gen {

void Gen::find_rebinds() {
  rebinds.assign(regs.size(), false);
  std::vector<const FNode*> asg_nodes;
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    if (n.op == Op::Assign) asg_nodes.push_back(&n);
    if (alloc_name(n)) makes_arrays = true;
    for (const FNode& k : n.kids) walk(k);
  };
  walk(loop_cond);
  walk(loop_body);
  for (bool more = true; more;) {
    more = false;
    for (const FNode* a : asg_nodes) {
      const int r = a->reg;
      const FNode& v = a->kids[0];
      const Reg::Kind k0 = regs[r].k;
      if (rebinds[r] || (k0 != Reg::Arr && k0 != Reg::Undef)) continue;
      // A variable of the loop's frames assigned a variable (u_prev = u,
      // swaps); a local of a function called inline only when that
      // variable's array changes too (its parameters otherwise hold the
      // caller's fixed arrays, whose accesses stay hoisted), or when it held
      // no array as the loop began (a function first called inside the loop,
      // maybe with other arrays at each call: AtA(u, v) then AtA(v, u)).
      const bool local = static_cast<size_t>(r) < im.vars.size() && im.vars[r].depth < 0;
      const FNode& src = is_iterate(v) && iterates_array(v) ? v.kids[0] : v;
      const bool from_var =
          src.op == Op::Var && (rebinds[src.reg] || !local || k0 == Reg::Undef);
      if (alloc_name(v) || from_var) rebinds[r] = more = true;
    }
  }
}

void Gen::find_lists() {
  std::vector<const FNode*> asg;
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    if (n.op == Op::NewList || (is_iterate(n) && !iterates_array(n)))
      lists = makes_arrays = true;
    if (n.op == Op::Append) lists = true;
    if (n.op == Op::NewDict) lists = makes_arrays = true;
    if (n.op == Op::Assign) asg.push_back(&n);
    for (const FNode& k : n.kids) walk(k);
  };
  walk(loop_cond);
  walk(loop_body);
  find_iterate_aliases();
  find_fixed_lists();
  item_kind.assign(regs.size(), -1);
  table_kind.assign(regs.size(), -1);
  for (size_t r = 0; r < regs.size(); ++r) {
    if (regs[r].k != Reg::Obj) continue;
    lists = true;
    const auto o = static_cast<size_t>(regs[r].a);
    if (o < objects.size()) table_kind[r] = native_table_kind(objects[o]);
    Reg first;
    if (o < objects.size() && objects[o].is_list() && objects[o].list_size() > 0 &&
        FastLoop::Impl::scalar_of(objects[o].list_item(0), first))
      item_kind[r] = first.k;
  }
  find_dicts(asg);
  find_str_regs();
  // Through `ys = xs` and `_it = iterate(xs)`, then from the variables
  // items are assigned to, until nothing changes.
  for (bool more = true; more;) {
    more = false;
    for (const FNode* a : asg) {
      const FNode& v = a->kids[0];
      // (and `_it = iterate(row + [0])`, `row = block(..., acc)`: the
      // kind of the items of the list the expression gives)
      if (item_kind[a->reg] < 0) {
        if (const int k = expr_item_kind(v); k >= 0) {
          item_kind[a->reg] = k;
          more = true;
        }
      }
      if (v.op == Op::GetItem && v.kids.size() == 2 && v.kids[0].op == Op::Var &&
          item_kind[v.kids[0].reg] < 0 && is_scalar(regs[a->reg].k)) {
        item_kind[v.kids[0].reg] = regs[a->reg].k;
        more = true;
      }
    }
  }
}

void Gen::find_fixed_lists() {
  list_fixed.assign(regs.size(), true);
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    if (n.op == Op::Assign || n.op == Op::Append) list_fixed[n.reg] = false;
    if (n.op == Op::SetItem && !n.kids.empty() && n.kids[0].op == Op::Var)
      list_fixed[n.kids[0].reg] = false;
    for (const FNode& k : n.kids) walk(k);
  };
  walk(loop_cond);
  walk(loop_body);
  table_plain.assign(regs.size(), true);
  std::function<void(const FNode&)> uses = [&](const FNode& n) {
    for (size_t k = 0; k < n.kids.size(); ++k) {
      const FNode& c = n.kids[k];
      if (c.op == Op::Var) {
        const bool container = k == 0 && (n.op == Op::GetItem || n.op == Op::SetItem);
        const bool len = n.op == Op::Call && n.spec && n.spec->name == "len";
        if (!container && !len) table_plain[c.reg] = false;
      }
      uses(c);
    }
  };
  uses(loop_cond);
  uses(loop_body);
  std::function<void(const FNode&)> assigns = [&](const FNode& n) {
    // t = setitem(t, ...) only, or a for loop's hidden `it = iterate(xs)` that
    // is xs itself (iterate_alias) when nothing in the loop changes xs (an
    // append to xs would move the items the alias's sites keep: primes_list's
    // `for i in p` then `p.append(n)`): `for c in coins` reads coins in place,
    // its items' address asked once per entry of the loop. An append to the
    // register: not a table.
    if (n.op == Op::Append) table_plain[n.reg] = false;
    const bool alias = n.op == Op::Assign && iterate_alias.count(&n.kids[0]) &&
                       list_fixed[n.kids[0].kids[0].reg];
    if (n.op == Op::Assign && !alias &&
        !(n.kids[0].op == Op::SetItem && n.kids[0].kids[0].op == Op::Var &&
          n.kids[0].kids[0].reg == n.reg))
      table_plain[n.reg] = false;
    for (const FNode& k : n.kids) assigns(k);
  };
  assigns(loop_cond);
  assigns(loop_body);
}

void Gen::find_iterate_aliases() {
  no_held.assign(regs.size(), false);
  std::vector<int> reads(regs.size(), 0), assigns(regs.size(), 0);
  std::function<void(const FNode&)> tally = [&](const FNode& n) {
    if (n.op == Op::Var) ++reads[n.reg];
    if (n.op == Op::Assign || n.op == Op::Append) ++assigns[n.reg];
    for (const FNode& k : n.kids) tally(k);
  };
  tally(loop_cond);
  tally(loop_body);
  std::function<void(const FNode&)> walk = [&](const FNode& blk) {
    for (const FNode& k : blk.kids) walk(k);
    if (blk.op != Op::Block) return;
    for (size_t i = 0; i < blk.kids.size(); ++i) {
      const FNode& a = blk.kids[i];
      if (a.op != Op::Assign || !is_iterate(a.kids[0]) || a.kids[0].kids[0].op != Op::Var)
        continue;
      const int it = a.reg, xs = a.kids[0].kids[0].reg;
      size_t w = i + 1;
      while (w < blk.kids.size() && blk.kids[w].op != Op::While) ++w;
      if (w == blk.kids.size() || assigns[it] != 1 || it == xs) continue;
      std::vector<int> in_reads(regs.size(), 0), in_assigns(regs.size(), 0);
      std::function<void(const FNode&)> local = [&](const FNode& n) {
        if (n.op == Op::Var) ++in_reads[n.reg];
        if (n.op == Op::Assign || n.op == Op::Append) ++in_assigns[n.reg];
        for (const FNode& k : n.kids) local(k);
      };
      for (size_t q = i + 1; q <= w; ++q) local(blk.kids[q]);
      if (in_reads[it] != reads[it] || in_assigns[xs] != 0) continue;
      iterate_alias.insert(&a.kids[0]);
      no_held[it] = true;
    }
  };
  walk(loop_cond);
  walk(loop_body);
}

bool Gen::iterates_array(const FNode& n) const {
  const FNode& x = n.kids[0];
  return x.op == Op::Var && regs[static_cast<size_t>(x.reg)].k == Reg::Arr;
}

bool Gen::is_iterate(const FNode& n) {
  return n.op == Op::Call && n.spec && n.spec->name == "iterate" && n.kids.size() == 1;
}

void Gen::find_const_only() {
  const_only.assign(regs.size(), false);
  std::vector<bool> other(regs.size(), false);
  std::function<void(const FNode&)> walk = [&](const FNode& n) {
    if (n.op == Op::Assign) {
      const bool c = n.kids[0].op == Op::Const && n.kids[0].constant.k == Reg::PyInt;
      (c ? const_only : other)[n.reg] = true;
    }
    for (const FNode& k : n.kids) walk(k);
  };
  walk(loop_cond);
  walk(loop_body);
  for (size_t r = 0; r < regs.size(); ++r) const_only[r] = const_only[r] && !other[r];
}

void Gen::rebound_in(const FNode& n, std::set<int>& out) const {
  if (n.op == Op::Assign && rebinds[n.reg] &&
      !(n.kids[0].op == Op::SetItem && n.kids[0].kids[0].op == Op::Var &&
        n.kids[0].kids[0].reg == n.reg))
    out.insert(n.reg);
  for (const FNode& k : n.kids) rebound_in(k, out);
}

void Gen::count_reads(const FNode& n, std::vector<int>& reads) {
  if (n.op == Op::Var) {
    ++reads[n.reg];
    return;
  }
  if (n.op == Op::Assign && n.kids[0].op == Op::SetItem && n.kids[0].kids[0].op == Op::Var &&
      n.kids[0].kids[0].reg == n.reg) {
    for (size_t q = 1; q < n.kids[0].kids.size(); ++q) count_reads(n.kids[0].kids[q], reads);
    return;
  }
  for (const FNode& k : n.kids) count_reads(k, reads);
}

}  // namespace tessera::native_gen
