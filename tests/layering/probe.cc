// Compiled by the layering_probe test with no Siphon layer linked: the
// include must fail, proving headers are visible only through link lines.
#include "msgr/base/buffer.h"
int main() { return 0; }
