import "./style.css";

document.getElementById("app").textContent = "version 1";
