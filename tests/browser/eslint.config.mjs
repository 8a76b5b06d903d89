// ESLint for the report's own script, templates/report.js: the only JavaScript the package ships. It is a
// classic browser script, not a module (one IIFE with "use strict", inlined into the report's <script>).
//
// Run from the repository's root (paths here are relative to it: with --config, ESLint's base path is the
// working directory), with --max-warnings 0 so that a file this config does not reach fails instead of
// passing with an "ignored" warning:
//   tests/browser/node_modules/.bin/eslint --config tests/browser/eslint.config.mjs --max-warnings 0 templates/report.js
import js from "@eslint/js";
import globals from "globals";

export default [
  {
    files: ["templates/report.js"],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: "latest",
      sourceType: "script",
      globals: { ...globals.browser },
    },
    rules: {
      ...js.configs.recommended.rules,
      complexity: ["error", 20],
      // The IIFE that wraps the whole script is exempt (the rule's IIFEs option is off by default).
      "max-lines-per-function": ["error", { max: 40, skipBlankLines: true, skipComments: true }],
    },
  },
];
