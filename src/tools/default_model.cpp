// The built-in model: models/deltallm-tiny-q8_0.gguf, placed in the binary's read-only data by the
// assembler (.incbin), so the binary needs no file beside it. CMake passes the file's path and
// its SHA-256 (the hash makes a compiler cache see a new model as a new object).
#include "tools/default_model.h"

#ifndef DELTALLM_BUILTIN_MODEL
#error "DELTALLM_BUILTIN_MODEL (the built-in GGUF's path) is set by CMakeLists.txt"
#endif

__asm__(
    ".pushsection .rodata\n"
    ".balign 64\n"
    "dl_builtin_model_begin:\n"
    ".incbin \"" DELTALLM_BUILTIN_MODEL
    "\"\n"
    "dl_builtin_model_end:\n"
    ".popsection\n");
extern "C" const uint8_t dl_builtin_model_begin[] __asm__("dl_builtin_model_begin");
extern "C" const uint8_t dl_builtin_model_end[] __asm__("dl_builtin_model_end");

namespace dl {

std::vector<uint8_t> default_model_image() {
    return std::vector<uint8_t>(dl_builtin_model_begin, dl_builtin_model_end);
}

std::string default_model_description() {
    return "deltallm-tiny (built in: a 12.6M-parameter Qwen3.5 trained on public-domain English "
           "text, Q8_0; sha256 " DELTALLM_BUILTIN_MODEL_SHA256 ")";
}

}  // namespace dl
