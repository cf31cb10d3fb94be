#pragma once
#define LKJIT_VERSION "0.1.0"
