// Nothing to compile: the shim is its header (include/shim.h). SwiftPM needs a source file.
#include "shim.h"
