// NFC through ICU's unorm2 (UTF-8 -> UTF-16 -> normalized -> UTF-8), skipped for ASCII.
#include "tokenizer/normalize.h"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>

namespace dl::tokenizer {

bool pre_uses_nfc(std::string_view pre) {
    return pre == "qwen2" || pre == "qwen35";
}

std::string to_nfc(std::string_view text) {
    bool ascii = true;
    for (char c : text) ascii = ascii && (unsigned char)c < 0x80;
    if (ascii || text.size() > (size_t)INT32_MAX / 4) return std::string(text);

    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2* nfc = unorm2_getNFCInstance(&err);
    if (U_FAILURE(err)) return std::string(text);
    int32_t n16 = 0;
    u_strFromUTF8(nullptr, 0, &n16, text.data(), (int32_t)text.size(), &err);
    if (err != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(err)) return std::string(text);  // not UTF-8
    err = U_ZERO_ERROR;
    std::vector<UChar> src((size_t)n16 + 1);
    u_strFromUTF8(src.data(), n16 + 1, &n16, text.data(), (int32_t)text.size(), &err);
    if (U_FAILURE(err)) return std::string(text);
    if (unorm2_isNormalized(nfc, src.data(), n16, &err) && U_SUCCESS(err)) return std::string(text);
    err = U_ZERO_ERROR;
    // Composition never lengthens UTF-16 text past a small factor; ask ICU when it does.
    std::vector<UChar> dst((size_t)n16 * 3 + 16);
    int32_t m = unorm2_normalize(nfc, src.data(), n16, dst.data(), (int32_t)dst.size(), &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) {
        err = U_ZERO_ERROR;
        dst.resize((size_t)m + 1);
        m = unorm2_normalize(nfc, src.data(), n16, dst.data(), (int32_t)dst.size(), &err);
    }
    if (U_FAILURE(err)) return std::string(text);
    int32_t n8 = 0;
    err = U_ZERO_ERROR;
    u_strToUTF8(nullptr, 0, &n8, dst.data(), m, &err);
    if (err != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(err)) return std::string(text);
    err = U_ZERO_ERROR;
    std::string out((size_t)n8, '\0');
    u_strToUTF8(out.data(), n8, &n8, dst.data(), m, &err);
    if (U_FAILURE(err) && err != U_STRING_NOT_TERMINATED_WARNING) return std::string(text);
    return out;
}

}  // namespace dl::tokenizer
