//! A well-formed component of another world entirely.
wit_bindgen::generate!({
    inline: "package acme:greeter@1.0.0;
             interface hello { greet: func(name: string) -> string; }
             world greeter { export hello; }",
});

struct G;

impl exports::acme::greeter::hello::Guest for G {
    fn greet(name: String) -> String {
        format!("hello {name}")
    }
}

export!(G);
