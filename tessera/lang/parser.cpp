#include "tessera/lang/parser.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iomanip>
#include <iterator>
#include <tuple>
#include <cstdlib>
#include <limits>
#include <unordered_map>

namespace tessera {

namespace {

struct CodeRange {
  char32_t first, last;
};
#include "tessera/lang/xid_tables.inc"

bool in_ranges(const CodeRange* begin, const CodeRange* end, char32_t c) {
  auto it = std::upper_bound(begin, end, c,
                             [](char32_t v, const CodeRange& r) { return v < r.first; });
  return it != begin && c <= (it - 1)->last;
}

// Identifiers are Python's (PEP 3131): an ASCII letter, '_' or a non-ASCII
// XID_Start code point, then ASCII letters, digits, '_' and XID_Continue
// code points (xid_tables.inc, from Python's own str.isidentifier). Names
// are compared as written: the Python front end hands them in the NFKC
// form Python gives them.
bool ident_start(char32_t c) {
  if (c < 0x80) return std::isalpha(static_cast<int>(c)) || c == '_';
  return in_ranges(std::begin(kXidStart), std::end(kXidStart), c);
}
bool ident_continue(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) || c == '_';
  return in_ranges(std::begin(kXidContinue), std::end(kXidContinue), c);
}

// The code point whose UTF-8 encoding starts at text[pos], and the number of
// its bytes; {0, 0} when the bytes there are not valid UTF-8 (a stray or
// missing continuation byte, an overlong form, a surrogate, past U+10FFFF).
std::pair<char32_t, size_t> decode_utf8(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char b = byte(pos);
  if (b < 0x80) return {b, 1};
  size_t n;
  char32_t c;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
    c = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    c = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    c = b & 0x07;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return {0, 0};
  }
  if (pos + n > text.size()) return {0, 0};
  for (size_t i = 1; i < n; ++i) {
    unsigned char t = byte(pos + i);
    if (t < (i == 1 ? lo : 0x80) || t > (i == 1 ? hi : 0xBF)) return {0, 0};
    c = (c << 6) | (t & 0x3F);
  }
  return {c, n};
}

enum class Tok { number_int, number_float, string, ident, op, lparen, rparen, lbracket, rbracket,
                 comma, assign, colon, end };

struct Token {
  Tok kind = Tok::end;
  std::string text;
  int64_t ival = 0;
  double fval = 0.0;
  SourceLoc loc;
  bool space_before = false;  // whitespace or a comment precedes the token
};

class Lexer {
 public:
  Lexer(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      size_t before = pos_;
      skip_space();
      Token t;
      t.space_before = pos_ != before;
      t.loc = here();
      if (pos_ >= text_.size()) {
        t.kind = Tok::end;
        out.push_back(t);
        return out;
      }
      char c = text_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && pos_ + 1 < text_.size() &&
           std::isdigit(static_cast<unsigned char>(text_[pos_ + 1])))) {
        lex_number(t);
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
                 static_cast<unsigned char>(c) >= 0x80) {
        lex_identifier(t);
      } else if (c == '"' || c == '\'') {
        lex_string(t);
      } else {
        lex_punct(t);
      }
      out.push_back(std::move(t));
    }
  }

 private:
  SourceLoc here() const { return SourceLoc{file_, line_, line_only_ ? 0 : col_}; }

  void advance() {
    // Positions stop counting at INT_MAX (a #line near it, a 2 GB line)
    // rather than overflow.
    if (text_[pos_] == '\n') {
      if (line_ < std::numeric_limits<int>::max()) ++line_;
      col_ = 1;
    } else if (col_ < std::numeric_limits<int>::max() &&
               (static_cast<unsigned char>(text_[pos_]) & 0xC0) != 0x80) {
      ++col_;  // columns count characters: a UTF-8 continuation byte adds none
    }
    ++pos_;
  }

  // The code point at pos_ (decode_utf8); an error at its position when the
  // bytes there are not valid UTF-8.
  std::pair<char32_t, size_t> code_point_here() const {
    auto [c, n] = decode_utf8(text_, pos_);
    if (n == 0) {
      fail(error_message("invalid UTF-8: byte 0x", std::hex, std::uppercase,
                         static_cast<int>(static_cast<unsigned char>(text_[pos_]))),
           here());
    }
    return {c, n};
  }

  // A name (see ident_start), or an error naming the character that cannot
  // start one.
  void lex_identifier(Token& t) {
    size_t b = pos_;
    auto [c, n] = code_point_here();
    if (!ident_start(c)) {
      fail(error_message("unexpected character '", text_.substr(pos_, n), "' (U+", std::hex,
                         std::uppercase, std::setw(4), std::setfill('0'),
                         static_cast<uint32_t>(c), ")"),
           t.loc);
    }
    for (;;) {
      for (size_t i = 0; i < n; ++i) advance();
      if (pos_ >= text_.size()) break;
      unsigned char d = static_cast<unsigned char>(text_[pos_]);
      if (d < 0x80) {
        if (!std::isalnum(d) && d != '_') break;
        n = 1;
        continue;
      }
      std::tie(c, n) = code_point_here();
      if (!ident_continue(c)) break;
    }
    t.kind = Tok::ident;
    t.text = std::string(text_.substr(b, pos_ - b));
  }

  [[noreturn]] void fail(const std::string& what, const SourceLoc& loc) const {
    throw SyntaxError(error_message("[parse] ", what, " (at ", loc.str(), ")"));
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else if (c == '#') {
        if (col_ == 1 && text_.substr(pos_, 6) == "#line ") {
          line_directive();
          continue;
        }
        // Shell-style comments too, so scripts may start with "#!".
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  // `#line N "file"` at the start of a line: the next line is line N of
  // `file` (the file name is optional). Generated code (the Python front end)
  // uses it so errors point at the user's source.
  void line_directive() {
    SourceLoc at = here();
    size_t p = pos_ + 6;
    while (p < text_.size() && text_[p] == ' ') ++p;
    size_t b = p;
    while (p < text_.size() && std::isdigit(static_cast<unsigned char>(text_[p]))) ++p;
    int n = 0;
    auto res = std::from_chars(text_.data() + b, text_.data() + p, n);
    if (b == p || res.ec != std::errc() || n <= 0) fail("#line needs a positive line number", at);
    while (p < text_.size() && text_[p] == ' ') ++p;
    std::string name = file_;
    if (p < text_.size() && text_[p] == '"') {
      name.clear();
      ++p;
      while (p < text_.size() && text_[p] != '"' && text_[p] != '\n') {
        if (text_[p] == '\\' && p + 1 < text_.size()) ++p;
        name += text_[p++];
      }
      if (p >= text_.size() || text_[p] != '"') fail("unterminated file name in #line", at);
      ++p;
    }
    while (p < text_.size() && text_[p] != '\n') ++p;
    pos_ = p < text_.size() ? p + 1 : p;
    line_ = n;
    col_ = 1;
    file_ = std::move(name);
    line_only_ = true;
  }

  void lex_number(Token& t) {
    size_t b = pos_;
    bool is_float = false;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) advance();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_float = true;
      advance();
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) advance();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t save = pos_;
      int save_col = col_;
      advance();
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) advance();
      if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        is_float = true;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          advance();
        }
      } else {
        pos_ = save;
        col_ = save_col;
      }
    }
    std::string s(text_.substr(b, pos_ - b));
    t.text = s;
    if (is_float) {
      t.kind = Tok::number_float;
      t.fval = std::strtod(s.c_str(), nullptr);
    } else {
      t.kind = Tok::number_int;
      auto res = std::from_chars(s.data(), s.data() + s.size(), t.ival);
      if (res.ec != std::errc()) fail("integer literal " + s + " is too large for int64", t.loc);
    }
    if (pos_ < text_.size()) {
      auto [c, n] = decode_utf8(text_, pos_);
      if (n > 0 && ident_continue(c) && !std::isdigit(static_cast<int>(c))) {
        fail("invalid number literal '" + s + std::string(text_.substr(pos_, n)) + "...'", t.loc);
      }
    }
  }

  void lex_string(Token& t) {
    char quote = text_[pos_];
    advance();
    std::string s;
    for (;;) {
      if (pos_ >= text_.size()) fail("unterminated string literal", t.loc);
      char c = text_[pos_];
      if (c == quote) {
        advance();
        break;
      }
      if (c == '\\' && pos_ + 1 < text_.size()) {
        advance();
        char e = text_[pos_];
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case '0': s += '\0'; break;
          default: s += e; break;
        }
        advance();
        continue;
      }
      s += c;
      advance();
    }
    t.kind = Tok::string;
    t.text = std::move(s);
  }

  void lex_punct(Token& t) {
    char c = text_[pos_];
    char n = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
    auto two = [&](const char* op) {
      t.kind = Tok::op;
      t.text = op;
      advance();
      advance();
    };
    auto one = [&](Tok k, char ch) {
      t.kind = k;
      t.text = std::string(1, ch);
      advance();
    };
    switch (c) {
      case '(': return one(Tok::lparen, c);
      case ')': return one(Tok::rparen, c);
      case '[': return one(Tok::lbracket, c);
      case ']': return one(Tok::rbracket, c);
      case ',': return one(Tok::comma, c);
      case ':': return one(Tok::colon, c);
      case '=':
        if (n == '=') return two("==");
        return one(Tok::assign, c);
      case '!':
        if (n == '=') return two("!=");
        return one(Tok::op, c);
      case '<':
        if (n == '=') return two("<=");
        return one(Tok::op, c);
      case '>':
        if (n == '=') return two(">=");
        return one(Tok::op, c);
      case '&':
        if (n == '&') return two("&&");
        break;
      case '|':
        if (n == '|') return two("||");
        break;
      case '*':
        if (n == '*') return two("**");
        return one(Tok::op, c);
      case '+': case '-': case '/': case '%': case '@':
        return one(Tok::op, c);
      default: break;
    }
    std::string shown = std::isprint(static_cast<unsigned char>(c))
                            ? std::string("'") + c + "'"
                            : error_message("byte 0x", std::hex, static_cast<int>(static_cast<unsigned char>(c)));
    fail("unexpected character " + shown, t.loc);
  }

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  bool line_only_ = false;  // after a #line directive, positions carry no column
};

struct BinaryOpInfo {
  const char* token;
  int precedence;
  bool right_assoc;
  const char* callee;  // primitive or special form the operator becomes
};

constexpr BinaryOpInfo kBinaryOps[] = {
    {"||", 1, false, "__or__"},   {"&&", 2, false, "__and__"},   {"==", 3, false, "equal"},
    {"!=", 3, false, "not_equal"}, {"<", 4, false, "less"},       {"<=", 4, false, "less_equal"},
    {">", 4, false, "greater"},    {">=", 4, false, "greater_equal"}, {"+", 5, false, "add"},
    {"-", 5, false, "subtract"},   {"*", 6, false, "multiply"},   {"/", 6, false, "divide"},
    {"%", 6, false, "mod"},        {"@", 6, false, "matmul"},     {"**", 8, true, "power"},
};
constexpr int kUnaryPrecedence = 7;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  std::vector<AstPtr> program() {
    std::vector<AstPtr> out;
    while (peek().kind != Tok::end) {
      out.push_back(top_level());
      // Optional separators between top-level expressions.
      while (peek().kind == Tok::comma) next();
    }
    return out;
  }

  AstPtr single() {
    AstPtr e = top_level();
    if (peek().kind != Tok::end) fail("unexpected '" + peek().text + "' after expression", peek());
    return e;
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() { return toks_[pos_++]; }

  // The error paths stay out of line: their temporaries would otherwise
  // grow the frames of the recursive functions, which the nesting limit
  // multiplies.
  [[noreturn, gnu::noinline, gnu::cold]] void fail(const std::string& what, const Token& at) const {
    fail(what, at.loc);
  }
  [[noreturn, gnu::noinline, gnu::cold]] void fail(const std::string& what,
                                                   const SourceLoc& at) const {
    throw SyntaxError(error_message("[parse] ", what, " (at ", at.str(), ")"));
  }
  [[noreturn, gnu::noinline, gnu::cold]] void fail_unexpected(const Token& t) const {
    fail("unexpected " + describe(t), t);
  }
  // "expected WHAT, found ..." at the next token.
  [[noreturn, gnu::noinline, gnu::cold]] void fail_expected(const char* what,
                                                            const char* more = "") const {
    fail(std::string("expected ") + what + more + ", found " + describe(peek()), peek());
  }

  std::string describe(const Token& t) const {
    if (t.kind == Tok::end) return "end of input";
    if (t.kind == Tok::string) return "string \"" + t.text + "\"";
    return "'" + t.text + "'";
  }

  void expect(Tok kind, const char* what) {
    if (peek().kind != kind) fail_expected(what);
    next();
  }

  const BinaryOpInfo* binary_op(const Token& t) const {
    if (t.kind != Tok::op) return nullptr;
    for (const auto& op : kBinaryOps) {
      if (t.text == op.token) return &op;
    }
    return nullptr;
  }

  AstPtr make_call(const char* callee, SourceLoc loc, std::vector<AstPtr> operands) {
    auto a = std::make_shared<Ast>();
    a->kind = Ast::Kind::call;
    a->name = callee;
    a->builtin = true;
    a->loc = std::move(loc);
    for (auto& o : operands) a->args.push_back({"", std::move(o)});
    return made(std::move(a));
  }

  // One top-level expression; an error if it nests deeper than
  // kMaxExpressionDepth (see made()).
  AstPtr top_level() {
    start_ = peek().loc;
    AstPtr e = expression(0);
    if (deepest_ > 0) {
      fail(error_message("expression nested ", deepest_, " levels deep: the limit is ",
                         kMaxExpressionDepth, " (split it into steps with define)"),
           start_);
    }
    heights_.clear();
    return e;
  }

  // The heights of a node made by this parser (1 and 1 for a leaf): how
  // deep it nests, which kMaxExpressionDepth bounds, and the height of its
  // tree, which every later pass recurses through (a chain adds one level
  // of nesting, and its tree stays within 2 * nesting + kChainSegment: see
  // chain()).
  struct Heights {
    int nesting = 1, tree = 1;
  };
  Heights heights(const AstPtr& a) const {
    auto it = heights_.find(a.get());
    return it == heights_.end() ? Heights{} : it->second.second;
  }
  int height(const AstPtr& a) const { return heights(a).nesting; }

  // Notes the heights of a node just made: one more than its deepest child.
  AstPtr made(std::shared_ptr<Ast> a) {
    Heights h{0, 0};
    auto child = [&](const AstPtr& c) {
      Heights ch = heights(c);
      h.nesting = std::max(h.nesting, ch.nesting);
      h.tree = std::max(h.tree, ch.tree);
    };
    if (a->callee) child(a->callee);
    for (const auto& arg : a->args) child(arg.value);
    return noted(std::move(a), {h.nesting + 1, h.tree + 1});
  }

  // Notes the heights of `a`. A node past the limit keeps its height but
  // drops its children, so the parser can go on counting how deep a long
  // postfix chain (`x[0][0]...`, `f(0)(0)...`, built by a loop, not
  // recursion) gets without holding a tree that every later pass (and the
  // destructor) would recurse through; top_level() then fails with the
  // depth.
  AstPtr noted(std::shared_ptr<Ast> a, Heights h) {
    if (h.nesting > kMaxExpressionDepth) {
      deepest_ = std::max(deepest_, h.nesting);
      if (a->callee) heights_.erase(a->callee.get());
      for (const auto& arg : a->args) heights_.erase(arg.value.get());
      a->callee = nullptr;
      a->args.clear();
      h.tree = 1;
    }
    if (h.nesting > 1) heights_[a.get()] = {a, h};
    return a;
  }

  // Recursion of the parser itself (parentheses, calls, brackets) cannot go
  // on far past the limit: the error says so at the level that passes it.
  // A level of nesting takes one or two recursions (a parenthesized right
  // operand `a + (...)` takes two, and the right operand of the innermost
  // operator is one call deeper than the tree it makes); the heights of
  // the nodes made (made(), noted()) bound the nesting itself.
  void enter(const Token& at) {
    if (++depth_ > 2 * kMaxExpressionDepth + 1) too_deep(at);
  }
  [[noreturn, gnu::noinline, gnu::cold]] void too_deep(const Token& at) const {
    fail(error_message("expression nested more than ", kMaxExpressionDepth,
                       " levels deep (the expression starts at ", start_.str(), "): the limit is ",
                       kMaxExpressionDepth, " (split it into steps with define)"),
         at);
  }

  // A chain of binary operators read by the loop of expression(): a left
  // fold, t0 op1 t1 op2 t2 ... = ((t0 op1 t1) op2 t2) ..., whatever the
  // operators' precedences (a right operand of higher precedence, or of a
  // right-associative operator, is a term that nests, parsed by
  // recursion). It nests one level more than its deepest term, however
  // long it is.
  //
  // A short chain is the tree of binary calls it always was (fusion, the
  // scalar loops and autodiff see the expression whole). A longer one is
  // lowered to a sequence, so that no pass after the parser (compiler,
  // autodiff, fusion, evaluation, printing, the destructors) recurses once
  // per term:
  //   block(define(C, <the first terms>),
  //         define(C, C op t op t ...),
  //         ...,
  //         C op t op t ...)              // the last ones: the block's value
  // where C is a variable of the enclosing function that no program can
  // name ("chain#N": '#' starts a comment). Each step applies the same
  // operators to the same operands in the same left-to-right order as the
  // tree would, so values (floating point included) and errors (at each
  // operator's position) are the same; && and || still stop at the first
  // operand that decides.
  //
  // A step holds at most kChainSegment terms, and fewer where its tree
  // would grow too high: the tree stays at most 2 * nesting + kChainSegment
  // levels high (Heights), so at kMaxExpressionDepth the passes that recurse
  // through it fit in a small stack however chains and nesting mix. A term
  // that is itself that high gets a step of its own, define(C2, term),
  // followed by C op C2 (C2 another such variable).
  struct ChainTerm {
    const char* callee;  // null for the first term
    SourceLoc loc;
    AstPtr ast;
    Heights h;
  };

  AstPtr binary(const char* callee, const SourceLoc& loc, AstPtr lhs, AstPtr rhs) const {
    auto a = std::make_shared<Ast>();
    a->kind = Ast::Kind::call;
    a->name = callee;
    a->builtin = true;
    a->loc = loc;
    a->args.push_back({"", std::move(lhs)});
    a->args.push_back({"", std::move(rhs)});
    return a;
  }
  static AstPtr variable(const std::string& name, const SourceLoc& loc) {
    auto v = std::make_shared<Ast>();
    v->kind = Ast::Kind::identifier;
    v->name = name;
    v->loc = loc;
    return v;
  }
  static AstPtr define(const std::string& name, const SourceLoc& loc, AstPtr value) {
    auto d = std::make_shared<Ast>();
    d->kind = Ast::Kind::call;
    d->name = "define";
    d->builtin = true;
    d->loc = loc;
    d->args.push_back({"", variable(name, loc)});
    d->args.push_back({"", std::move(value)});
    return d;
  }

  // The chain of `terms` (nesting at most `nesting` each) and the height of
  // its tree.
  // (Out of line: its locals would otherwise grow the frame of the
  // recursive expression().)
  [[gnu::noinline]] std::pair<AstPtr, int> chain(std::vector<ChainTerm>& terms, int nesting) {
    const int budget = 2 * nesting + kChainSegment;  // of a step of the sequence
    if (terms.size() <= static_cast<size_t>(kChainSegment)) {
      // The tree of calls, unless a deep term would make it too high.
      int tree = 0;
      for (size_t i = 0; i < terms.size(); ++i) {
        int above = static_cast<int>(terms.size() - std::max<size_t>(i, 1));  // operators
        tree = std::max(tree, terms[i].h.tree + above);
      }
      if (tree <= budget + 2) {
        AstPtr cur = std::move(terms[0].ast);
        for (size_t i = 1; i < terms.size(); ++i) {
          cur = binary(terms[i].callee, terms[i].loc, std::move(cur), std::move(terms[i].ast));
        }
        return {cur, tree};
      }
    }
    const std::string name = "chain#" + std::to_string(++chains_);
    const std::string term_name = name + "t";
    auto b = std::make_shared<Ast>();
    b->kind = Ast::Kind::call;
    b->name = "block";
    b->builtin = true;
    b->loc = terms[0].ast->loc;
    int tree = 0;  // of the block's statements so far
    AstPtr cur;
    int cur_tree = 0, cur_terms = 0;
    bool cur_is_name = false;  // cur is C itself (a step was just closed)
    auto close = [&](const SourceLoc& loc) {
      if (cur_is_name) return;
      b->args.push_back({"", define(name, loc, std::move(cur))});
      tree = std::max(tree, cur_tree + 1);
      cur = variable(name, loc);
      cur_tree = cur_terms = 1;
      cur_is_name = true;
    };
    for (auto& t : terms) {
      const bool deep = t.h.tree + 1 > budget;
      if (!t.callee) {
        cur = std::move(t.ast);
        cur_tree = t.h.tree;
        cur_terms = 1;
        if (deep) close(t.loc);
        continue;
      }
      if (deep) {
        close(t.loc);
        b->args.push_back({"", define(term_name, t.loc, std::move(t.ast))});
        tree = std::max(tree, t.h.tree + 1);
        cur = binary(t.callee, t.loc, std::move(cur), variable(term_name, t.loc));
        cur_tree = cur_terms = 2;
        cur_is_name = false;
        continue;
      }
      if (cur_terms == kChainSegment || std::max(cur_tree, t.h.tree) + 1 > budget) close(t.loc);
      cur_tree = std::max(cur_tree, t.h.tree) + 1;
      cur = binary(t.callee, t.loc, std::move(cur), std::move(t.ast));
      ++cur_terms;
      cur_is_name = false;
    }
    b->args.push_back({"", std::move(cur)});
    return {b, std::max(tree, cur_tree) + 1};
  }

  AstPtr expression(int min_prec) {
    enter(peek());
    AstPtr first = unary();
    const BinaryOpInfo* op = binary_op(peek());
    if (!op || op->precedence < min_prec) {
      --depth_;
      return first;
    }
    std::vector<ChainTerm> terms;
    Heights fh = heights(first);
    int nesting = fh.nesting;
    terms.push_back({nullptr, first->loc, std::move(first), fh});
    do {
      const Token& t = next();
      int next_min = op->right_assoc ? op->precedence : op->precedence + 1;
      AstPtr rhs = expression(next_min);
      Heights rh = heights(rhs);
      nesting = std::max(nesting, rh.nesting);
      terms.push_back({op->callee, t.loc, std::move(rhs), rh});
      op = binary_op(peek());
    } while (op && op->precedence >= min_prec);
    --depth_;
    auto [node, tree] = chain(terms, nesting);
    return noted(std::const_pointer_cast<Ast>(node), {nesting + 1, tree});
  }

  AstPtr unary() {
    const Token& t = peek();
    if (t.kind == Tok::op && (t.text == "-" || t.text == "!" || t.text == "+")) {
      const Token& op = next();
      AstPtr operand = expression(kUnaryPrecedence);
      // Fold negative number literals so that -1 is a constant, not a call.
      if (op.text == "-" && operand->kind == Ast::Kind::literal &&
          (operand->value.is_int() || operand->value.is_float())) {
        auto lit = std::make_shared<Ast>(*operand);
        lit->loc = op.loc;
        if (lit->value.is_int()) {
          lit->value = Value(-lit->value.as_int());
        } else {
          lit->value = Value(-lit->value.as_float());
        }
        return lit;
      }
      if (op.text == "+") return operand;
      return make_call(op.text == "-" ? "negative" : "logical_not", op.loc, {operand});
    }
    return postfix(primary());
  }

  AstPtr postfix(AstPtr e) {
    for (;;) {
      // x[i, a:b] indexes, when `[` follows without a space: `f(x) [1, 2]`
      // stays two expressions, as top-level expressions are space-separated.
      if (peek().kind == Tok::lbracket && !peek().space_before) {
        e = index(e);
        continue;
      }
      if (peek().kind != Tok::lparen) break;
      next();
      auto call = std::make_shared<Ast>();
      call->kind = Ast::Kind::call;
      call->loc = e->loc;
      if (e->kind == Ast::Kind::identifier) {
        call->name = e->name;
      } else {
        call->callee = e;
      }
      call->args = arguments(Tok::rparen, "')'", true);
      e = made(std::move(call));
    }
    return e;
  }

  // x[i, start:stop:step, ...] becomes getitem(x, i, slice(start, stop, step), ...).
  AstPtr index(AstPtr target) {
    const Token& lb = next();
    auto call = std::make_shared<Ast>();
    call->kind = Ast::Kind::call;
    call->name = "getitem";
    call->builtin = true;
    call->loc = lb.loc;
    call->args.push_back({"", target});
    if (peek().kind == Tok::rbracket) fail("empty index []", peek());
    for (;;) {
      call->args.push_back({"", index_item()});
      if (peek().kind == Tok::comma) {
        next();
        continue;
      }
      expect(Tok::rbracket, "',' or ']'");
      return made(std::move(call));
    }
  }

  AstPtr index_item() {
    SourceLoc loc = peek().loc;
    auto nil = [&] {
      auto a = std::make_shared<Ast>();
      a->loc = loc;
      return a;
    };
    auto ends_part = [&] {
      Tok k = peek().kind;
      return k == Tok::colon || k == Tok::comma || k == Tok::rbracket;
    };
    AstPtr start = ends_part() ? nullptr : expression(0);
    if (peek().kind != Tok::colon) {
      if (!start) fail_expected("an index");
      return start;
    }
    next();
    AstPtr stop = ends_part() ? nullptr : expression(0);
    AstPtr step;
    if (peek().kind == Tok::colon) {
      next();
      step = ends_part() ? nullptr : expression(0);
    }
    auto call = std::make_shared<Ast>();
    call->kind = Ast::Kind::call;
    call->name = "slice";
    call->builtin = true;
    call->loc = loc;
    call->args = {{"", start ? start : nil()}, {"", stop ? stop : nil()}, {"", step ? step : nil()}};
    return made(std::move(call));
  }

  std::vector<AstArg> arguments(Tok close, const char* close_text, bool allow_named) {
    std::vector<AstArg> args;
    if (peek().kind == close) {
      next();
      return args;
    }
    for (;;) {
      AstArg arg;
      if (allow_named && peek().kind == Tok::ident && toks_[pos_ + 1].kind == Tok::assign) {
        arg.name = next().text;
        next();
      }
      arg.value = expression(0);
      args.push_back(std::move(arg));
      if (peek().kind == Tok::comma) {
        next();
        if (peek().kind == close) {  // trailing comma
          next();
          return args;
        }
        continue;
      }
      if (peek().kind == close) {
        next();
        return args;
      }
      fail_expected("',' or ", close_text);
    }
  }

  AstPtr primary() {
    const Token& t = next();
    auto a = std::make_shared<Ast>();
    a->loc = t.loc;
    switch (t.kind) {
      case Tok::number_int: a->value = Value(t.ival); return a;
      case Tok::number_float: a->value = Value(t.fval); return a;
      case Tok::string: a->value = Value(t.text); return a;
      case Tok::ident:
        if (t.text == "true") {
          a->value = Value(true);
        } else if (t.text == "false") {
          a->value = Value(false);
        } else if (t.text == "nil") {
          a->value = Value();
        } else if (t.text == "inf") {
          a->value = Value(std::numeric_limits<double>::infinity());
        } else if (t.text == "nan") {
          a->value = Value(std::numeric_limits<double>::quiet_NaN());
        } else {
          a->kind = Ast::Kind::identifier;
          a->name = t.text;
        }
        return a;
      case Tok::lparen: {
        AstPtr inner = expression(0);
        expect(Tok::rparen, "')'");
        return inner;
      }
      case Tok::lbracket: {
        a->kind = Ast::Kind::list;
        a->args = arguments(Tok::rbracket, "']'", false);
        return made(std::move(a));
      }
      default:
        fail_unexpected(t);
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;  // recursion of expression()
  SourceLoc start_;  // where the current top-level expression starts
  int deepest_ = 0;  // the height of the deepest node past the limit, if any
  int chains_ = 0;   // chains lowered to sequences so far (their variables' names)
  // Heights of the nodes made for the current top-level expression, with
  // the nodes (kept so an address is never reused while it is here).
  std::unordered_map<const Ast*, std::pair<AstPtr, Heights>> heights_;
};

}  // namespace

std::vector<AstPtr> parse_program(std::string_view text, const std::string& file) {
  return Parser(Lexer(text, file).run()).program();
}

AstPtr parse_expression(std::string_view text, const std::string& file) {
  return Parser(Lexer(text, file).run()).single();
}

std::string Ast::str() const {
  switch (kind) {
    case Kind::literal: return value.is_string() ? "\"" + value.as_string() + "\"" : value.str();
    case Kind::identifier: return name;
    case Kind::list: {
      std::string s = "[";
      for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].value->str();
      return s + "]";
    }
    case Kind::call: {
      std::string s = callee ? "(" + callee->str() + ")" : name;
      s += "(";
      for (size_t i = 0; i < args.size(); ++i) {
        if (i) s += ", ";
        if (!args[i].name.empty()) s += args[i].name + "=";
        s += args[i].value->str();
      }
      return s + ")";
    }
  }
  return "?";
}

}  // namespace tessera
