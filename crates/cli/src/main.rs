fn main() -> std::process::ExitCode {
    corral::run()
}
