// SPDX-License-Identifier: Apache-2.0
//
// named.h -- strategies registered by name in one table (the explorer's
// persistency models, the simulator's models): makeNamed finds an entry
// {name, make} by the name an option gave, or throws an Error that lists
// the names there are.

#ifndef PMKIT_TRACEREADER_NAMED_H
#define PMKIT_TRACEREADER_NAMED_H

#include "trace.h" // pmx::Error

#include <string>

namespace pmx {

template <class Table>
auto makeNamed(const Table &table, const std::string &name, const char *what)
    -> decltype(table.begin()->make()) {
  std::string known;
  for (const auto &e : table) {
    if (name == e.name)
      return e.make();
    known += known.empty() ? "" : ", ";
    known += e.name;
  }
  throw Error(std::string("unknown ") + what + " '" + name + "' (choose from " +
              known + ")");
}

} // namespace pmx

#endif // PMKIT_TRACEREADER_NAMED_H
