// The one start-up of the libraries under the record layer: libsodium (key exchange, signatures,
// BLAKE2b) and the CPU dispatch (crypto/dispatch.h). Thread-safe; later calls are cheap.
#pragma once

namespace aesxfer::proto {

// Initialises libsodium once; throws std::runtime_error when it cannot. Leaves the dispatch
// choice to the environment (AESXFER_NO_AESNI) unless init(bool) made it first.
void init();

// The same, making the dispatch choice first: no_aesni forces the portable code (--no-aesni).
// Call before anything asks for the dispatch (main does, after parsing the command line); throws
// std::logic_error when the dispatch was already filled with the other choice.
void init(bool no_aesni);

}  // namespace aesxfer::proto
