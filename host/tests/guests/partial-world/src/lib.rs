//! The right interface name, at a later patch version (0.2.7, which the host
//! accepts as compatible), but with only one of its functions.
wit_bindgen::generate!({
    inline: "package warden:policy@0.2.7;
             interface validator {
                 record violation { pointer: string, rule: string, message: string }
                 record definition-options { allow-loopback-http: bool }
                 check-definition: func(definition: string, options: definition-options) -> result<_, list<violation>>;
             }
             world guest { export validator; }",
});

use exports::warden::policy::validator::{DefinitionOptions, Guest, Violation};

struct G;

impl Guest for G {
    fn check_definition(_: String, _: DefinitionOptions) -> Result<(), Vec<Violation>> {
        Ok(())
    }
}

export!(G);
