/* lithium/export.h: the LT_API visibility macro for the public functions of liblithium.
 * Every header of the public API includes it. Any thread. */
#ifndef LITHIUM_EXPORT_H
#define LITHIUM_EXPORT_H

#if defined(__GNUC__)
#define LT_API __attribute__((visibility("default")))
#else
#define LT_API
#endif

#endif
