// SPDX-License-Identifier: Apache-2.0
//
// AsmDecode.cpp -- asmEffect of Common/PersistOps.h: what an inline asm
// statement does to persistence, read from its machine code. The template's
// operand references ($0, ${0:k}, ...) are replaced by concrete operands of
// the kinds their constraints ask for -- a distinct general register per
// register or memory operand ("(%r8)" for "m", "%r9" for "r"), the constant
// of an immediate -- and the text is assembled by LLVM's x86-64 assembler
// (MCAsmParser into a streamer that keeps the bytes of .text, whether they
// come from mnemonics or .byte directives). The bytes are decoded again by
// the x86 disassembler, so prefixes written as data combine with the
// instruction after them as they do on the CPU. Each clflush, clflushopt,
// clwb, sfence, mfence, lock-prefixed instruction and xchg with a memory
// operand becomes an AsmOp; a flush's base register is traced back to the
// operand, hence the call argument, that holds the flushed address.
//
// The X86 target's MC layer comes from the LLVM library the host tool
// (clang, opt) already loaded; passes/CMakeLists.txt links the same shared
// library, and the target's initialisers run once, on first use.

#include "Common/PersistOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCCodeEmitter.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCExpr.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCObjectFileInfo.h"
#include "llvm/MC/MCParser/MCAsmLexer.h"
#include "llvm/MC/MCParser/MCAsmParser.h"
#include "llvm/MC/MCParser/MCTargetAsmParser.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCStreamer.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"

#include <memory>
#include <mutex>
#include <optional>

extern "C" void LLVMInitializeX86TargetInfo();
extern "C" void LLVMInitializeX86TargetMC();
extern "C" void LLVMInitializeX86AsmParser();
extern "C" void LLVMInitializeX86Disassembler();

using namespace llvm;
using namespace pmkit;

#define DEBUG_TYPE "pmkit-asm"

STATISTIC(NumDecoded, "Inline asm statements judged by their machine code");
STATISTIC(NumTextFallbacks,
          "Inline asm statements judged by the text rules (did not assemble)");

namespace {

// ---- the general registers and how operands name them ---------------------

struct Gpr {
  const char *Q, *D, *W, *B, *H; // 64, 32, 16, 8 bits, high byte (or null)
};
const Gpr Gprs[16] = {{"rax", "eax", "ax", "al", "ah"},
                      {"rbx", "ebx", "bx", "bl", "bh"},
                      {"rcx", "ecx", "cx", "cl", "ch"},
                      {"rdx", "edx", "dx", "dl", "dh"},
                      {"rsi", "esi", "si", "sil", nullptr},
                      {"rdi", "edi", "di", "dil", nullptr},
                      {"rbp", "ebp", "bp", "bpl", nullptr},
                      {"rsp", "esp", "sp", "spl", nullptr},
                      {"r8", "r8d", "r8w", "r8b", nullptr},
                      {"r9", "r9d", "r9w", "r9b", nullptr},
                      {"r10", "r10d", "r10w", "r10b", nullptr},
                      {"r11", "r11d", "r11w", "r11b", nullptr},
                      {"r12", "r12d", "r12w", "r12b", nullptr},
                      {"r13", "r13d", "r13w", "r13b", nullptr},
                      {"r14", "r14d", "r14w", "r14b", nullptr},
                      {"r15", "r15d", "r15w", "r15b", nullptr}};
// The order in which operands without a fixed register get one: those a
// template is least likely to name itself first; never rsp or rbp.
const int FreeOrder[] = {8, 9, 10, 11, 12, 13, 14, 15, 4, 5, 1, 2, 3, 0};

int gprOf(StringRef Name) {
  std::string N = Name.lower();
  for (int I = 0; I < 16; I++) {
    const Gpr &G = Gprs[I];
    if (N == G.Q || N == G.D || N == G.W || N == G.B || (G.H && N == G.H))
      return I;
  }
  return -1;
}

// Whether Text names register Name as a word of its own ("%r8", "[r8]",
// but not "r8d").
bool namesWord(StringRef Text, StringRef Name) {
  for (size_t P = Text.find(Name); P != StringRef::npos;
       P = Text.find(Name, P + 1)) {
    bool Start = P == 0 || !isAlnum(Text[P - 1]);
    size_t E = P + Name.size();
    bool End = E == Text.size() || !isAlnum(Text[E]);
    if (Start && End)
      return true;
  }
  return false;
}

// The general registers operands may be given: not those the template
// names itself, nor those fixed constraints or clobbers reserve.
struct FreeGprs {
  bool Taken[16] = {};
  explicit FreeGprs(StringRef Template) {
    std::string Low = Template.lower();
    for (int G = 0; G < 16; G++)
      for (const char *N :
           {Gprs[G].Q, Gprs[G].D, Gprs[G].W, Gprs[G].B, Gprs[G].H})
        if (N && namesWord(Low, N))
          Taken[G] = true;
  }
  void take(int G) {
    if (G >= 0)
      Taken[G] = true;
  }
  // The next free register, taken; -1 when none is left.
  int next() {
    const int *F = find_if(FreeOrder, [&](int G) { return !Taken[G]; });
    if (F == std::end(FreeOrder))
      return -1;
    Taken[*F] = true;
    return *F;
  }
};

enum class OpKind { Reg, Mem, Imm, Label, Vec, Other };

// One operand of the template ($N): what it is substituted by.
struct Operand {
  OpKind Kind = OpKind::Reg;
  bool MemAlt = false; // "rm": memory is the other choice
  int Gpr = -1;        // Reg, and the base register of Mem
  bool FixedGpr = false;
  std::string Name; // Vec and Other: the register's name
  int64_t Imm = 0;
  unsigned Bits = 64; // the value's width
  int Arg = -1;       // the call argument holding its value
  // Arg's value is the address the operand's register holds or its memory
  // form names: a register operand, an indirect memory operand ("*m") or
  // an address ("p") -- not a value the compiler spilled for "rm" or "g".
  bool ArgIsAddress = true;
};

unsigned bitsOf(Type *T) {
  if (!T || T->isPointerTy())
    return 64;
  unsigned B = T->getPrimitiveSizeInBits().getFixedValue();
  return B ? B : 64;
}

// The text that replaces a reference to O with modifier Mod (0 if none).
std::optional<std::string> spell(const Operand &O, char Mod, bool Intel) {
  auto Mem = [&](int64_t Off) -> std::optional<std::string> {
    if (O.Gpr < 0)
      return std::nullopt;
    std::string R = Gprs[O.Gpr].Q;
    if (Intel)
      return "[" + R + (Off ? "+" + std::to_string(Off) : "") + "]";
    return (Off ? std::to_string(Off) : "") + "(%" + R + ")";
  };
  auto Num = [&](int64_t V) { return std::to_string(V); };
  switch (O.Kind) {
  case OpKind::Mem:
    if (Mod == 'H')
      return Mem(8);
    return Mem(0);
  case OpKind::Imm:
    if (Mod == 'c' || Mod == 'P' || Intel)
      return Num(O.Imm);
    if (Mod == 'n')
      return Num(-O.Imm);
    return "$" + Num(O.Imm);
  case OpKind::Label:
    return std::string("pmkit_asm_label");
  case OpKind::Vec: {
    std::string N = O.Name;
    if (Mod == 'x' || Mod == 't' || Mod == 'g')
      N = std::string(Mod == 'x' ? "x" : Mod == 't' ? "y" : "z") + N.substr(1);
    return Intel || Mod == 'V' ? N : "%" + N;
  }
  case OpKind::Other:
    return Intel || Mod == 'V' ? O.Name : "%" + O.Name;
  case OpKind::Reg:
    break;
  }
  if (O.Gpr < 0)
    return std::nullopt;
  if (Mod == 'a' || Mod == 'H')
    return Mem(Mod == 'H' ? 8 : 0);
  const Gpr &G = Gprs[O.Gpr];
  unsigned Bits = O.Bits <= 8 ? 8 : O.Bits <= 16 ? 16 : O.Bits <= 32 ? 32 : 64;
  if (O.Bits > 64)
    return std::nullopt; // a register pair: not modelled
  const char *N = nullptr;
  switch (Mod) {
  case 'q':
    Bits = 64;
    break;
  case 'k':
    Bits = 32;
    break;
  case 'w':
    Bits = 16;
    break;
  case 'b':
    Bits = 8;
    break;
  case 'h':
    N = G.H;
    if (!N)
      return std::nullopt;
    break;
  case 'z': // the instruction suffix of the operand's size
    return std::string(Bits == 8    ? "b"
                       : Bits == 16 ? "w"
                       : Bits == 32 ? "l"
                                    : "q");
  default:
    break;
  }
  if (!N)
    N = Bits == 64 ? G.Q : Bits == 32 ? G.D : Bits == 16 ? G.W : G.B;
  return Intel || Mod == 'V' ? std::string(N) : "%" + std::string(N);
}

// The template with every operand reference replaced (as the asm printer
// expands it), or nothing if a reference cannot be spelt.
std::optional<std::string> expand(StringRef T, ArrayRef<Operand> Ops,
                                  bool Intel) {
  std::string Out;
  int Variant = -1, Want = Intel ? 1 : 0;
  size_t I = 0;
  auto Emit = [&](StringRef S) {
    if (Variant == -1 || Variant == Want)
      Out += S.str();
  };
  while (I < T.size()) {
    char C = T[I];
    if (C != '$') {
      Emit(T.substr(I, 1));
      I++;
      continue;
    }
    I++;
    if (I >= T.size())
      return std::nullopt;
    char N = T[I];
    if (N == '$') {
      Emit("$");
      I++;
      continue;
    }
    if (N == '(') {
      Variant = 0;
      I++;
      continue;
    }
    if (N == '|') {
      if (Variant == -1)
        Out += "|";
      else
        Variant++;
      I++;
      continue;
    }
    if (N == ')') {
      Variant = -1;
      I++;
      continue;
    }
    bool Brace = N == '{';
    if (Brace)
      I++;
    if (Brace && I < T.size() && T[I] == ':') { // ${:uid}, ${:comment}
      size_t E = T.find('}', I);
      if (E == StringRef::npos)
        return std::nullopt;
      StringRef Special = T.slice(I + 1, E);
      Emit(Special == "uid"       ? "0"
           : Special == "comment" ? "#"
           : Special == "private" ? ".L"
                                  : "");
      I = E + 1;
      continue;
    }
    size_t Start = I;
    while (I < T.size() && isDigit(T[I]))
      I++;
    unsigned Idx;
    if (T.slice(Start, I).getAsInteger(10, Idx) || Idx >= Ops.size())
      return std::nullopt;
    char Mod = 0;
    if (Brace) {
      if (I < T.size() && T[I] == ':' && I + 1 < T.size()) {
        Mod = T[I + 1];
        I += 2;
      }
      if (I >= T.size() || T[I] != '}')
        return std::nullopt;
      I++;
    }
    std::optional<std::string> S = spell(Ops[Idx], Mod, Intel);
    if (!S)
      return std::nullopt;
    Emit(*S);
  }
  return Out;
}

// ---- the assembler and the disassembler -----------------------------------

// The parts of the MC layer that need no context, made once.
struct MCParts {
  const Target *T = nullptr;
  Triple TT;
  std::unique_ptr<MCRegisterInfo> MRI;
  std::unique_ptr<MCAsmInfo> MAI;
  std::unique_ptr<MCInstrInfo> MII;
  std::unique_ptr<MCSubtargetInfo> STI;
  MCTargetOptions Options;
  MCRegister GprReg[16]; // the 64-bit registers of Gprs
};

const MCParts *mcParts() {
  static std::once_flag Once;
  static MCParts *Parts = nullptr;
  std::call_once(Once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmParser();
    LLVMInitializeX86Disassembler();
    auto P = std::make_unique<MCParts>();
    P->TT = Triple("x86_64-unknown-linux-gnu");
    std::string Err;
    P->T = TargetRegistry::lookupTarget(P->TT.str(), Err);
    if (!P->T)
      return;
    P->MRI.reset(P->T->createMCRegInfo(P->TT.str()));
    if (!P->MRI)
      return;
    P->MAI.reset(P->T->createMCAsmInfo(*P->MRI, P->TT.str(), P->Options));
    P->MII.reset(P->T->createMCInstrInfo());
    // Every instruction a template may name, whatever the function's
    // target features: what matters is the code, not where it may run.
    P->STI.reset(P->T->createMCSubtargetInfo(P->TT.str(), "sapphirerapids",
                                             "+clwb,+clflushopt"));
    if (!P->MAI || !P->MII || !P->STI)
      return;
    for (int I = 0; I < 16; I++)
      for (unsigned R = 1; R < P->MRI->getNumRegs(); R++)
        if (StringRef(P->MRI->getName(R)).equals_insensitive(Gprs[I].Q))
          P->GprReg[I] = R;
    Parts = P.release();
  });
  return Parts;
}

// A streamer that keeps the bytes emitted into the text section: encoded
// instructions and data directives alike.
class ByteStreamer : public MCStreamer {
public:
  ByteStreamer(MCContext &Ctx, MCCodeEmitter &Emitter, MCSection *Text)
      : MCStreamer(Ctx), Emitter(Emitter), Text(Text) {}
  SmallVector<char, 64> Bytes;
  bool Bad = false; // something in .text whose bytes are unknown

  void emitInstruction(const MCInst &Inst,
                       const MCSubtargetInfo &STI) override {
    if (!inText())
      return;
    SmallVector<MCFixup, 4> Fixups;
    raw_svector_ostream OS(Bytes);
    Emitter.encodeInstruction(Inst, OS, Fixups, STI);
  }
  void emitBytes(StringRef Data) override {
    if (inText())
      Bytes.append(Data.begin(), Data.end());
  }
  void emitValueImpl(const MCExpr *Value, unsigned Size, SMLoc) override {
    int64_t V = 0;
    if (!Value->evaluateAsAbsolute(V))
      V = 0; // a relocation: its bytes are data, not opcodes
    emitIntValue(V, Size);
  }
  void emitFill(const MCExpr &NumBytes, uint64_t Value, SMLoc) override {
    int64_t N;
    if (!inText())
      return;
    if (!NumBytes.evaluateAsAbsolute(N) || N < 0 || N > 4096) {
      Bad = true;
      return;
    }
    Bytes.append(size_t(N), char(Value));
  }
  bool emitSymbolAttribute(MCSymbol *, MCSymbolAttr) override { return true; }
  void emitCommonSymbol(MCSymbol *, uint64_t, Align) override {}
  void emitZerofill(MCSection *, MCSymbol *, uint64_t, Align, SMLoc) override {}

private:
  MCCodeEmitter &Emitter;
  MCSection *Text;
  bool inText() { return getCurrentSectionOnly() == Text; }
};

// A flush or fence as decoded: a flush's memory operand by register. A
// memory access (IsMem) has its operand the same way, and Store, Locked and
// Size.
struct RawOp {
  bool IsFlush;
  uint32_t Kind;
  MCRegister Base, Index, Segment;
  int64_t Disp;
  bool IsMem = false, Store = false, Locked = false;
  uint32_t Size = 0;
};

// The bytes an x86 instruction reads or writes, from its opcode's name
// (MOV64mr, LCMPXCHG32, LOCK_ADD64mi8, XCHG16rm): the first 8, 16, 32 or 64
// in it, in bits; cmpxchg8b and cmpxchg16b in bytes. 0 if the name does not
// say (vector moves).
uint32_t accessBytes(StringRef Name) {
  if (Name.contains("CMPXCHG16B"))
    return 16;
  if (Name.contains("CMPXCHG8B"))
    return 8;
  for (size_t I = 0; I < Name.size(); I++) {
    if (!isDigit(Name[I]) || (I && isDigit(Name[I - 1])))
      continue;
    unsigned Bits = 0;
    Name.substr(I).take_while(isDigit).getAsInteger(10, Bits);
    if (Bits == 8 || Bits == 16 || Bits == 32 || Bits == 64)
      return Bits / 8;
  }
  return 0;
}

// The memory operand of Inst (the first operand the description calls
// memory) into R's Base, Index, Segment and Disp; false if it has none in
// the expected five-part form.
bool memOperand(const MCInst &Inst, const MCInstrDesc &D, RawOp &R) {
  unsigned M = 0;
  while (M < D.getNumOperands() &&
         D.operands()[M].OperandType != MCOI::OPERAND_MEMORY)
    M++;
  if (!(M + 4 < Inst.getNumOperands() && Inst.getOperand(M).isReg() &&
        Inst.getOperand(M + 2).isReg() && Inst.getOperand(M + 4).isReg()))
    return false;
  R.Base = Inst.getOperand(M).getReg();
  R.Index = Inst.getOperand(M + 2).getReg();
  R.Segment = Inst.getOperand(M + 4).getReg();
  const MCOperand &Disp = Inst.getOperand(M + 3);
  if (Disp.isImm())
    R.Disp = Disp.getImm();
  else
    R.Base = MCRegister(); // a symbolic displacement: unknown address
  return true;
}

bool isPrefix(uint8_t B) {
  switch (B) {
  case 0xf0:
  case 0xf2:
  case 0xf3:
  case 0x2e:
  case 0x36:
  case 0x3e:
  case 0x26:
  case 0x64:
  case 0x65:
  case 0x66:
  case 0x67:
    return true;
  default:
    return (B & 0xf0) == 0x40; // REX
  }
}

// Assembles Text and decodes the result. False if either step fails.
bool machineOps(const MCParts &P, StringRef Text, bool Intel,
                SmallVectorImpl<RawOp> &Out) {
  SourceMgr SM;
  SM.setDiagHandler([](const SMDiagnostic &, void *) {}, nullptr);
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, "<inline asm>"),
                        SMLoc());
  MCContext Ctx(P.TT, P.MAI.get(), P.MRI.get(), P.STI.get(), &SM, &P.Options);
  bool CtxError = false;
  Ctx.setDiagnosticHandler(
      [&](const SMDiagnostic &, bool, const SourceMgr &,
          std::vector<const MDNode *> &) { CtxError = true; });
  std::unique_ptr<MCObjectFileInfo> MOFI(
      P.T->createMCObjectFileInfo(Ctx, /*PIC=*/false));
  Ctx.setObjectFileInfo(MOFI.get());
  std::unique_ptr<MCCodeEmitter> CE(P.T->createMCCodeEmitter(*P.MII, Ctx));
  std::unique_ptr<MCDisassembler> Dis(P.T->createMCDisassembler(*P.STI, Ctx));
  if (!CE || !Dis)
    return false;
  ByteStreamer Str(Ctx, *CE, MOFI->getTextSection());
  Str.switchSection(MOFI->getTextSection());
  std::unique_ptr<MCAsmParser> Parser(createMCAsmParser(SM, Ctx, Str, *P.MAI));
  std::unique_ptr<MCTargetAsmParser> TAP(
      P.T->createMCAsmParser(*P.STI, *Parser, *P.MII, P.Options));
  if (!TAP)
    return false;
  Parser->setAssemblerDialect(Intel ? 1 : 0);
  Parser->setTargetParser(*TAP);
  if (Intel)
    Parser->getLexer().setLexMasmIntegers(true);
  if (Parser->Run(/*NoInitialTextSection=*/true, /*NoFinalize=*/true) ||
      CtxError || Ctx.hadError() || Str.Bad)
    return false;

  ArrayRef<uint8_t> Bytes(reinterpret_cast<const uint8_t *>(Str.Bytes.data()),
                          Str.Bytes.size());
  bool LockNext = false;
  for (uint64_t Off = 0; Off < Bytes.size();) {
    MCInst Inst;
    uint64_t Size = 0;
    if (Dis->getInstruction(Inst, Size, Bytes.slice(Off), Off, nulls()) !=
            MCDisassembler::Success ||
        Size == 0)
      return false;
    bool Lock = false;
    for (uint64_t I = Off; I < Off + Size && isPrefix(Bytes[I]); I++)
      Lock |= Bytes[I] == 0xf0;
    Off += Size;
    const MCInstrDesc &D = P.MII->get(Inst.getOpcode());
    StringRef Name = P.MII->getName(Inst.getOpcode());
    uint32_t Flush = Name == "CLWB"         ? FlushClwb
                     : Name == "CLFLUSHOPT" ? FlushClflushopt
                     : Name == "CLFLUSH"    ? FlushClflush
                                            : 0;
    // (The disassembler may decode a lock prefix as an instruction of its
    // own: it locks the next one.)
    bool Fences = Lock || (Name.startswith("XCHG") && D.mayLoad());
    bool Locked = Fences || LockNext;
    LockNext = Name == "LOCK_PREFIX";
    if (!Flush && (D.mayLoad() || D.mayStore())) {
      RawOp R{false, 0, MCRegister(), MCRegister(), MCRegister(), 0};
      R.IsMem = true;
      R.Store = D.mayStore();
      R.Locked = Locked;
      R.Size = accessBytes(Name);
      // (Stack pushes and pops, string instructions: no memory operand.)
      if (memOperand(Inst, D, R))
        Out.push_back(R);
    }
    if (Flush) {
      RawOp R{true, Flush, MCRegister(), MCRegister(), MCRegister(), 0};
      memOperand(Inst, D, R);
      Out.push_back(R);
    } else if (Name == "SFENCE") {
      Out.push_back({false, FenceSfence, {}, {}, {}, 0});
    } else if (Name == "MFENCE") {
      Out.push_back({false, FenceMfence, {}, {}, {}, 0});
    } else if (Fences) {
      // A locked instruction: lock prefix, or xchg with a memory operand.
      Out.push_back({false, FenceLocked, {}, {}, {}, 0});
    }
  }
  return true;
}

// ---- operands from constraints --------------------------------------------

// The operands of CB's asm from its constraints, each with a register of
// its own; false if a constraint is not understood.
bool operandsOf(const CallBase &CB, const InlineAsm &IA,
                SmallVectorImpl<Operand> &Ops) {
  InlineAsm::ConstraintInfoVector CIs = IA.ParseConstraints();
  Type *RetTy = CB.getType();
  unsigned Arg = 0, DirectOut = 0;
  FreeGprs Free(IA.getAsmString());
  for (const InlineAsm::ConstraintInfo &CI : CIs)
    for (const std::string &Code : CI.Codes)
      if (Code.size() > 2 && Code.front() == '{')
        Free.take(gprOf(StringRef(Code).drop_front().drop_back()));
  unsigned VecNext = 8;
  for (const InlineAsm::ConstraintInfo &CI : CIs) {
    if (CI.Type == InlineAsm::isClobber)
      continue;
    Operand O;
    Type *Ty = nullptr;
    if (CI.Type == InlineAsm::isOutput && !CI.isIndirect) {
      auto *ST = dyn_cast<StructType>(RetTy);
      Ty =
          ST ? (DirectOut < ST->getNumElements() ? ST->getElementType(DirectOut)
                                                 : nullptr)
             : RetTy;
      DirectOut++;
    } else if (CI.Type == InlineAsm::isLabel) {
      O.Kind = OpKind::Label;
      Ops.push_back(O);
      continue;
    } else {
      if (Arg >= CB.arg_size())
        return false;
      O.Arg = Arg++;
      Ty = CB.getArgOperand(O.Arg)->getType();
    }
    O.Bits = bitsOf(Ty);
    if (CI.Codes.empty())
      return false;
    StringRef C = CI.Codes[0];
    if (!C.empty() && isDigit(C[0])) { // tied to an output
      unsigned Tied;
      if (C.getAsInteger(10, Tied) || Tied >= Ops.size())
        return false;
      int A = O.Arg;
      O = Ops[Tied];
      O.Arg = A;
      Ops.push_back(O);
      continue;
    }
    for (const std::string &Alt : drop_begin(CI.Codes))
      if (Alt == "m" || Alt == "o" || Alt == "V")
        O.MemAlt = true;
    Value *V = O.Arg >= 0 ? CB.getArgOperand(O.Arg) : nullptr;
    auto *K = dyn_cast_or_null<ConstantInt>(V);
    if (C.size() > 2 && C.front() == '{') {
      StringRef R = C.drop_front().drop_back();
      O.Gpr = gprOf(R);
      if (O.Gpr >= 0) {
        O.FixedGpr = true;
      } else {
        O.Kind =
            R.startswith("xmm") || R.startswith("ymm") || R.startswith("zmm")
                ? OpKind::Vec
                : OpKind::Other;
        O.Name = R.str();
      }
    } else if (C.size() == 1 && StringRef("abcdSD").contains(C[0])) {
      O.Gpr = StringRef("abcdSD").find(C[0]);
      if (O.Gpr >= 4)
        O.Gpr = C[0] == 'S' ? 4 : 5;
      O.FixedGpr = true;
    } else if (C == "A") {
      O.Gpr = 0;
      O.FixedGpr = true;
    } else if (C == "r" || C == "q" || C == "Q" || C == "R" || C == "l" ||
               C == "g" || C == "X") {
      if ((C == "g" || C == "X") && K) {
        O.Kind = OpKind::Imm;
        O.Imm = K->getSExtValue();
      }
      if (C == "g")
        O.MemAlt = true;
    } else if (C == "m" || C == "o" || C == "V" || C == "<" || C == ">" ||
               C == "p") {
      O.Kind = OpKind::Mem;
      O.ArgIsAddress = CI.isIndirect || C == "p";
    } else if (C.size() == 1 && StringRef("inesEFZIJKLMNOGC").contains(C[0])) {
      O.Kind = OpKind::Imm;
      O.Imm = K ? K->getSExtValue() : 0;
    } else if (C == "x" || C == "v" || C.startswith("Y")) {
      if (C == "Yz") {
        O.Kind = OpKind::Vec;
        O.Name = "xmm0";
      } else if (C == "Yk" || C == "k") {
        O.Kind = OpKind::Other;
        O.Name = "k1";
      } else {
        O.Kind = OpKind::Vec;
        if (VecNext > 15)
          return false;
        std::string P = O.Bits == 512 ? "zmm" : O.Bits == 256 ? "ymm" : "xmm";
        O.Name = P + std::to_string(VecNext++);
      }
    } else if (C == "k") {
      O.Kind = OpKind::Other;
      O.Name = "k1";
    } else if (C == "y") {
      O.Kind = OpKind::Other;
      O.Name = "mm1";
    } else if (C == "t" || C == "f") {
      O.Kind = OpKind::Other;
      O.Name = "st";
    } else if (C == "u") {
      O.Kind = OpKind::Other;
      O.Name = "st(1)";
    } else {
      return false;
    }
    Ops.push_back(O);
  }
  // A general register of its own for every register and memory operand.
  for (Operand &O : Ops) {
    if (O.FixedGpr || !(O.Kind == OpKind::Reg || O.Kind == OpKind::Mem))
      continue;
    if ((O.Gpr = Free.next()) < 0)
      return false;
  }
  return true;
}

// ---- the effect -----------------------------------------------------------

AsmEffect summarise(AsmEffect E) {
  for (const AsmOp &Op : E.Ops) {
    if (Op.IsFlush && !E.Flush)
      E.Flush = Op.Kind;
    if (!Op.IsFlush) {
      auto Rank = [](uint32_t K) {
        return K == FenceMfence ? 3 : K == FenceSfence ? 2 : K ? 1 : 0;
      };
      if (Rank(Op.Kind) > Rank(E.Fence))
        E.Fence = Op.Kind;
    }
  }
  return E;
}

// Each decoded flush's address as an operand's argument plus a
// displacement, when its base register is an operand's.
AsmEffect fromRaw(const MCParts &P, ArrayRef<RawOp> Raw,
                  ArrayRef<Operand> Ops) {
  AsmEffect E;
  E.Decoded = true;
  for (const RawOp &R : Raw) {
    int Arg = -1;
    if ((R.IsFlush || R.IsMem) && R.Base && !R.Index && !R.Segment)
      for (const Operand &O : Ops)
        if (O.Gpr >= 0 && O.Arg >= 0 && O.ArgIsAddress &&
            (O.Kind == OpKind::Reg || O.Kind == OpKind::Mem) &&
            P.MRI->isSubRegisterEq(P.GprReg[O.Gpr], R.Base)) {
          Arg = O.Arg;
          break;
        }
    if (R.IsMem) {
      // The stack and RIP-relative data (the program's globals) are not PM.
      StringRef BaseName = R.Base ? P.MRI->getName(R.Base) : "";
      if (Arg < 0 && (BaseName == "RSP" || BaseName == "RBP" ||
                      BaseName == "RIP" || BaseName == "ESP"))
        continue;
      AsmMem M;
      M.Store = R.Store;
      M.Locked = R.Locked;
      M.Size = R.Size;
      M.Arg = Arg;
      M.Disp = Arg >= 0 ? R.Disp : 0;
      E.Mem.push_back(M);
      continue;
    }
    AsmOp Op;
    Op.IsFlush = R.IsFlush;
    Op.Kind = R.Kind;
    if (Arg >= 0) {
      Op.Arg = Arg;
      Op.Disp = R.Disp;
    }
    E.Ops.push_back(Op);
  }
  return summarise(E);
}

// Tries the template with the given operands, and again with the memory
// form of every operand that allows one.
bool tryAssemble(const MCParts &P, StringRef Template,
                 SmallVectorImpl<Operand> &Ops, bool Intel,
                 SmallVectorImpl<RawOp> &Raw) {
  for (int Pass = 0; Pass < 2; Pass++) {
    if (Pass == 1) {
      bool Any = false;
      for (Operand &O : Ops)
        if (O.MemAlt && O.Kind != OpKind::Mem) {
          // The compiler spills the value: the slot's address is in no
          // argument.
          O.Kind = OpKind::Mem;
          O.ArgIsAddress = false;
          Any = true;
        }
      if (!Any)
        return false;
    }
    std::optional<std::string> Text = expand(Template, Ops, Intel);
    Raw.clear();
    if (Text && machineOps(P, *Text, Intel, Raw))
      return true;
  }
  return false;
}

std::mutex CacheLock;
StringMap<AsmEffect> &cache() {
  static StringMap<AsmEffect> C;
  return C;
}

template <typename Fn> AsmEffect cached(const std::string &Key, Fn Compute) {
  {
    std::lock_guard<std::mutex> G(CacheLock);
    auto It = cache().find(Key);
    if (It != cache().end()) {
      ++(It->second.Decoded ? NumDecoded : NumTextFallbacks);
      return It->second;
    }
  }
  AsmEffect E = Compute();
  ++(E.Decoded ? NumDecoded : NumTextFallbacks);
  std::lock_guard<std::mutex> G(CacheLock);
  cache()[Key] = E;
  return E;
}

} // namespace

AsmEffect pmkit::asmEffect(const CallBase &CB) {
  const auto *IA = dyn_cast<InlineAsm>(CB.getCalledOperand());
  if (!IA)
    return AsmEffect();
  bool Intel = IA->getDialect() == InlineAsm::AD_Intel;
  StringRef Template = IA->getAsmString();
  // The key: everything the result depends on, constants included.
  std::string Key =
      (Intel ? "I" : "A") + Template.str() + '\0' + IA->getConstraintString();
  for (const Value *V : CB.args())
    if (const auto *K = dyn_cast<ConstantInt>(V))
      Key += '\0' + std::to_string(K->getSExtValue());
    else
      Key += '\0';
  return cached(Key, [&] {
    const MCParts *P = mcParts();
    SmallVector<Operand, 8> Ops;
    SmallVector<RawOp, 4> Raw;
    if (P && operandsOf(CB, *IA, Ops) &&
        tryAssemble(*P, Template, Ops, Intel, Raw))
      return fromRaw(*P, Raw, Ops);
    return asmEffectText(Template);
  });
}

AsmEffect pmkit::asmEffect(StringRef Template) {
  return cached("T" + Template.str(), [&] {
    const MCParts *P = mcParts();
    // As many operands as the template refers to, all registers first.
    unsigned N = 0;
    for (size_t I = Template.find('$'); I != StringRef::npos;
         I = Template.find('$', I + 1)) {
      StringRef Rest = Template.substr(I + 1);
      if (Rest.startswith("$")) {
        I++;
        continue;
      }
      Rest.consume_front("{");
      unsigned Idx;
      StringRef Digits = Rest.take_while(isDigit);
      if (!Digits.empty() && !Digits.getAsInteger(10, Idx))
        N = std::max(N, Idx + 1);
    }
    SmallVector<Operand, 8> Ops(N);
    FreeGprs Free(Template);
    for (Operand &O : Ops) {
      O.MemAlt = true;
      if ((O.Gpr = Free.next()) < 0)
        return asmEffectText(Template);
    }
    SmallVector<RawOp, 4> Raw;
    if (P && tryAssemble(*P, Template, Ops, /*Intel=*/false, Raw))
      return fromRaw(*P, Raw, {});
    return asmEffectText(Template);
  });
}
