// The example page's bugs: a failed fetch, a console.error, an uncaught TypeError.
function renderCart(cart) {
  const list = document.getElementById('cart');
  for (const item of cart.items) {
    const li = document.createElement('li');
    li.textContent = item.name + ' × ' + item.quantity;
    list.appendChild(li);
  }
}

async function loadCart() {
  const r = await fetch('/api/cart');
  if (!r.ok) {
    console.error('cart: GET /api/cart answered ' + r.status);
    return undefined;
  }
  return r.json();
}

loadCart().then((cart) => {
  setTimeout(() => renderCart(cart), 0);
});
