fn main() {
    // Protobuf definitions are compiled by the `proto` module's build step
    // (added with the binary-inputs issue).
    println!("cargo:rerun-if-changed=build.rs");
}
