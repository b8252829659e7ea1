// LeakSanitizer's default suppressions for a binary that renders PDFs with poppler: an
// object library (fairlane_poppler_lsan) that fairlane, fairlane-pdfgen, fairlane_tests and
// the fuzz targets link.
// fontconfig, which poppler asks for a font to draw Helvetica with, leaks a few hundred
// bytes of its configuration once per process (FcInitLoadConfigAndFonts, while it parses its
// XML); the leak is theirs, and with leaks fatal under ASan every rendering binary would fail.
// It is named by the library: ASan's fast unwinder stops inside fontconfig, which has no
// frame pointers, so the function is not on the stack it records. fairlane itself calls no
// fontconfig function.
//
// Thread safety: LeakSanitizer calls this once, at exit.
#if defined(__SANITIZE_ADDRESS__)
#define FAIRLANE_LSAN_SUPPRESSIONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAIRLANE_LSAN_SUPPRESSIONS 1
#endif
#endif

#ifdef FAIRLANE_LSAN_SUPPRESSIONS
#include <sanitizer/lsan_interface.h>

extern "C" const char* __lsan_default_suppressions() {
  return "leak:libfontconfig.so\n";
}

// Without this, every run under ASan ends by listing the suppression it used.
extern "C" const char* __lsan_default_options() {
  return "print_suppressions=0";
}
#endif
