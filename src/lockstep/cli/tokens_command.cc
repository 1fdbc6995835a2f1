#include "lockstep/cli/tokens_command.h"

#include <cstdio>

#include "lockstep/data/text_tokens.h"

namespace lockstep::cli {

CLI::App* AddTokensCommand(CLI::App& app, TokensArgs* args) {
  CLI::App* c = app.add_subcommand("tokens", "write a token file (llm.c format) for data.kind = \"tokens\"");
  c->add_option("--from-text", args->from_text,
                "a text corpus directory (the files data.kind = \"text\" reads) or one file: one token per byte")
      ->required();
  c->add_option("--out", args->out, "the token file to write")->required();
  return c;
}

Status RunTokensCommand(const TokensArgs& args) {
  LS_ASSIGN_OR_RETURN(data::TextTokensSummary s, data::WriteTextAsTokens(args.from_text, args.out));
  std::printf("wrote %s: %lld tokens (byte-level, vocab 256) from %lld file%s of %s\n", args.out.c_str(),
              static_cast<long long>(s.tokens), static_cast<long long>(s.files), s.files == 1 ? "" : "s",
              args.from_text.c_str());
  return Status::Ok();
}

}  // namespace lockstep::cli
