// The client's config file and -o options applied (client/config.h parses them): which file is
// read, that it is safe to read, and where ~ points.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "client/config.h"

namespace aesxfer::app {

// The values for host alias `alias`: the -o options first (first obtained wins), then the config
// file: `file` when given (-F; "none" reads nothing), else $AESXFER_HOME/config if it exists. A
// config file must be owned by the user (or root) and writable by nobody else, as ssh requires
// of ~/.ssh/config. Throws client::ConfigError with one line. `read_from` gets the file read ("" if none).
client::HostConfig load_host_config(const std::string& file, const std::filesystem::path& home,
                                    const std::vector<std::string>& options, const std::string& alias,
                                    std::string* read_from = nullptr);

// $HOME (or the password database's home directory), for "~" in IdentityFile and -i.
std::string user_home();

}  // namespace aesxfer::app
