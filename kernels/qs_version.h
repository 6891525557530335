/* Tool version, recorded with every stored result and PNG.  The Makefile passes the real values. */
#ifndef QS_VERSION_H
#define QS_VERSION_H
#ifndef QS_VERSION
#define QS_VERSION "0.0.0-dev"
#endif
#ifndef QS_GIT_REV
#define QS_GIT_REV "unknown"
#endif
#endif
