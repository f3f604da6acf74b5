/* The one Apple SDK header ring's C includes (ring-core/base.h), for checking the
 * Apple targets on Linux (scripts/apple-check.sh): the values Apple's macOS SDK gives.
 * Never used for a binary that runs; a real macOS build uses the SDK's own header. */
#ifndef CORRAL_TARGET_CONDITIONALS_H
#define CORRAL_TARGET_CONDITIONALS_H
#define TARGET_OS_MAC 1
#define TARGET_OS_OSX 1
#define TARGET_OS_IPHONE 0
#define TARGET_OS_IOS 0
#define TARGET_OS_WATCH 0
#define TARGET_OS_TV 0
#define TARGET_OS_SIMULATOR 0
#endif
