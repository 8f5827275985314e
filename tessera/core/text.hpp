// Escaping of names and source positions for the text formats tessera writes
// (the execution tree as DOT, counters as CSV).
#pragma once

#include <string>

namespace tessera {

// s inside a DOT double-quoted string: quotes and backslashes escaped,
// newlines as spaces.
inline std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

// s as one CSV field (RFC 4180): quoted when it holds a comma, quote or
// newline, with quotes doubled.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace tessera
