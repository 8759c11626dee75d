/// The text of a panic payload (`panic!("..")` carries a `&str` or a `String`).
///
/// ```
/// let payload = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
/// assert_eq!(toolgraft::error::panic_message(payload.as_ref()), "boom 1");
/// ```
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}
