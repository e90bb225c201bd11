/* version.h - gmsim's version, recorded in every result. */
#ifndef GM_VERSION_H
#define GM_VERSION_H

#define GM_VERSION "0.1.0"

#endif
