// SPDX-License-Identifier: Apache-2.0
// Execution test: a program whose functions carry pmkit annotations builds
// with the plugin at -O0 and -O2 and behaves as without it, and in the IR
// the pmkit.fase function keeps its attribute and stays a real call
// (PMKIT_FASE implies noinline) that mode passes can instrument. Without the
// plugin the attribute is missing, so the IR checks must fail.
//
// RUN: %clang_pm -O0 %s -o %t.O0.exe
// RUN: %t.O0.exe | %FileCheck %s --check-prefix=OUT
// RUN: %clang_pm -O2 %s -o %t.O2.exe
// RUN: %t.O2.exe | %FileCheck %s --check-prefix=OUT
// RUN: %clang_nopm -O2 %s -o %t.nopm.exe
// RUN: %t.nopm.exe | %FileCheck %s --check-prefix=OUT
//
// RUN: %clang_pm -O2 -S -emit-llvm %s -o - | %FileCheck %s --check-prefix=IR
// RUN: %clang_nopm -O2 -S -emit-llvm %s -o - \
// RUN:   | %not %FileCheck %s --check-prefix=IR

// OUT: balance 100 -> 70
// OUT-NEXT: transfers 3
// OUT-NEXT: rejected 1

// IR-LABEL: define {{.*}}i32 @transfer(
// IR-SAME: #[[FASE:[0-9]+]]
// IR-LABEL: define {{.*}}i32 @main(
// IR: call {{.*}}i32 @transfer(
// IR: attributes #[[FASE]] = { {{.*}}"pmkit.fase"

#include <pmkit/annotations.h>
#include <stdio.h>

struct account {
  long balance;
  long transfers;
};

// Failure-atomic in clobber/ssapp modes: both fields change or neither.
PMKIT_FASE int transfer(struct account *a, long amount) {
  if (a->balance < amount)
    return -1;
  a->balance -= amount;
  a->transfers += 1;
  return 0;
}

int main(void) {
  struct account acct = {100, 0};
  long amounts[] = {10, 15, 500, 5};
  int rejected = 0;
  for (unsigned i = 0; i < sizeof amounts / sizeof amounts[0]; i++)
    if (transfer(&acct, amounts[i]) != 0)
      rejected++;
  printf("balance 100 -> %ld\n", acct.balance);
  printf("transfers %ld\n", acct.transfers);
  printf("rejected %d\n", rejected);
  return 0;
}
